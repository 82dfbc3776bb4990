// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;

/**
 * What the cache costs in Java heap per wrapper: the heap used after full collections,
 * before and after making N objects that stay reachable, over N.
 * <ol>
 *   <li>N Wrappers made directly: the wrapper alone;
 *   <li>N wrappers through WrapperCache.at(): the wrapper and whatever the binding keeps in
 *       Java for it, which is nothing (the cache is native memory, and WrapperSweeper needs no
 *       object per wrapper);
 *   <li>for comparison, a Cleaner registration on each of the N plain wrappers, with the action
 *       a binding that removes entries one by one would need: a Runnable holding the entry's
 *       token, two longs (a PhantomReference of the binding's own as the token costs 56).
 * </ol>
 * Prints the three figures and fails unless the cache adds less than 8 bytes per wrapper (one
 * field's worth: the measurement's resolution). Nothing is ever released: the JVM exits with
 * every object alive, so no Cleaner action runs.
 */
public final class WrapperFootprint {
  private static final int N = 200_000;
  private static final MemoryMXBean MEMORY = ManagementFactory.getMemoryMXBean();
  private static volatile int actionsRun; // written by the Cleaner's one thread, if ever

  private WrapperFootprint() {}

  /** The action a Cleaner-based binding registers: the token, and its removal in run(). */
  private static final class ForgetAction implements Runnable {
    private final long pointer;
    private final long weak;

    ForgetAction(long pointer, long weak) {
      this.pointer = pointer;
      this.weak = weak;
    }

    @Override
    public void run() { // never runs: every registered object stays reachable (checked at the end)
      ++actionsRun;
    }
  }

  // The heap in use once full collections no longer change it: the first ones of a run also
  // free what start-up left (about 2 MB, 10 bytes per measured object), so collect until two
  // in a row agree.
  private static long usedAfterGc() {
    long last = -1;
    for (int i = 0; i < 10; ++i) {
      System.gc();
      long used = MEMORY.getHeapMemoryUsage().getUsed();
      if (used == last) {
        return used;
      }
      last = used;
    }
    return last;
  }

  public static void main(String[] args) {
    final long handle = NativeObjects.create(N);
    final long[] pointers = new long[N];
    for (int i = 0; i < N; ++i) {
      pointers[i] = NativeObjects.pointerAt(handle, i);
    }
    final Wrapper[] plain = new Wrapper[N];
    final Wrapper[] cached = new Wrapper[N];
    final Cleaner cleaner = Cleaner.create();
    // Warm up every path once (class loading, the sweeper thread, the Cleaner's), so that the
    // measured steps allocate only their objects.
    final Object warm = new Object();
    cleaner.register(warm, new ForgetAction(0, 0));
    Check.that(WrapperCache.at(handle, 0) != null, "footprint: a wrapper");

    long before = usedAfterGc();
    for (int i = 0; i < N; ++i) {
      plain[i] = new Wrapper(pointers[i]);
    }
    final double wrapperBytes = (double) (usedAfterGc() - before) / N;

    before = usedAfterGc();
    for (int i = 0; i < N; ++i) {
      cached[i] = WrapperCache.at(handle, i);
    }
    final double cachedBytes = (double) (usedAfterGc() - before) / N;
    Check.equal(N, WrapperCache.entries(), "footprint: entries");

    before = usedAfterGc();
    for (int i = 0; i < N; ++i) {
      cleaner.register(plain[i], new ForgetAction(pointers[i], i));
    }
    final double cleanerBytes = (double) (usedAfterGc() - before) / N;

    final double cacheBytes = cachedBytes - wrapperBytes;
    System.out.printf("footprint: Java heap per wrapper (%d wrappers, %s): the wrapper %.1f B; added by the "
            + "cache %.1f B; a Cleaner registration would add %.1f B (PhantomCleanableRef and the action)%n",
        N, System.getProperty("java.vm.version"), wrapperBytes, cacheBytes, cleanerBytes);
    Check.that(cacheBytes < 8.0, "footprint: the cache keeps Java objects per wrapper (" + cacheBytes + " B)");
    Check.that(cleanerBytes >= 8.0, "footprint: the Cleaner comparison measured nothing (" + cleanerBytes + " B)");
    Check.equal(0, actionsRun, "footprint: Cleaner actions run (a measured object died)");
    // Everything measured or measured beside stays reachable to here: a compiled main() may
    // otherwise drop an array after its last use, between two readings (pointers, 8 bytes
    // per object, once made Cleaner look 8 bytes lighter).
    Reference.reachabilityFence(warm);
    Reference.reachabilityFence(pointers);
    Reference.reachabilityFence(plain);
    Reference.reachabilityFence(cached);
    Reference.reachabilityFence(cleaner);
  }
}

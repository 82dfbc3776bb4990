// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;

import palrt.jvmhost.NativeObjects;
import palrt.jvmhost.Wrapper;

/**
 * The {@code bytes} case: what N live cached wrappers cost, measured, not computed from
 * object layouts: the growth of the Java heap and of the process's malloc'd memory between
 * "no wrapper" and "N wrappers made through the variant and held".
 *
 * <ul>
 *   <li>Java heap: MemoryMXBean's used heap after two System.gc() (full, compacting: the
 *       figure is what is live). The wrapper objects themselves count, for every variant alike
 *       (a Wrapper is 24 bytes with compressed oops); so do the variant's Java-side objects
 *       (chm: the boxed key, the WeakReference subclass, the map's node and table; palrt and
 *       mutex-map: the cleaner's PhantomReference and its action). The array holding the
 *       wrappers is made before the first figure and does not count.
 *   <li>Native: glibc's in-use bytes ({@link NativeHeap}), read in a native method: palrt's
 *       tables and the unordered_map's nodes and buckets (operator new), the JVM's storage of
 *       the JNI weak global references (OopStorage blocks, malloc'd), chunk headers included;
 *       less the growth of what HotSpot mallocs for itself meanwhile ({@link
 *       JvmScratchMemory}: compiler arenas above all; it needs -XX:NativeMemoryTracking=summary).
 * </ul>
 *
 * <p>Before the first figure the same make-drop-collect-clean round runs on a separate set of
 * objects (a twentieth of N, at least a thousand) until --warmup-ms has passed: C2 compiles
 * most of the path now, and the probes make their own first-use allocations. (Not all of it:
 * code that runs only at larger sizes, as a map's resize past the warm-up's size, is compiled
 * while the figures are taken, hence JvmScratchMemory.) That set's round leaves the cache's
 * tables sized for it, for every variant alike (none of the three shrinks its table on
 * removal): a twentieth of the entries measured.
 *
 * <p>Reported: {@code bytes} = (heap growth + native growth) / N, and each part alone
 * ({@code heap_bytes}, {@code native_bytes}).
 */
final class BytesBench {
  private BytesBench() {}

  static void run(Options o) {
    final Variant variant = Variant.named(o.variant);
    final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    final int warmN = Math.max(1000, o.n / 20);
    final long warmHandle = NativeObjects.create(warmN);
    final long handle = NativeObjects.create(o.n);
    int[] warmOrder = identity(warmN);
    Wrapper[] warmHeld = new Wrapper[warmN];
    final long until = System.nanoTime() + o.warmupMs * 1_000_000L;
    for (int round = 0; round < 10 || System.nanoTime() - until < 0; round++) {
      WrapperRounds.makeAll(variant, warmHandle, warmOrder, warmHeld);
      WrapperRounds.dropAndCollect(warmHeld);
      WrapperRounds.awaitCleanedUp(variant, o.variant);
      heapUsed(memory);  // the probes' own first-use allocations, before the first figure
      JvmScratchMemory.bytes();
      NativeHeap.inUseBytes();
    }

    int[] order = identity(o.n);
    Wrapper[] held = new Wrapper[o.n];
    settle(variant);
    long heapBefore = heapUsed(memory);
    long scratchBefore = JvmScratchMemory.bytes();
    long mallocBefore = NativeHeap.inUseBytes();
    WrapperRounds.makeAll(variant, handle, order, held);
    settle(null);  // nothing to clean up: every wrapper is held
    long heapAfter = heapUsed(memory);
    long scratchAfter = JvmScratchMemory.bytes();
    long mallocAfter = NativeHeap.inUseBytes();
    long entries = variant.entries();
    if (entries != o.n)
      throw new IllegalStateException(o.variant + ": " + entries + " entries for " + o.n + " live wrappers");
    WrapperRounds.release(variant, held, o.variant);  // held until here; then no wrapper is left
    NativeObjects.destroy(handle);
    NativeObjects.destroy(warmHandle);  // its last round's cleanups ran in the warm-up

    long heapGrowth = heapAfter - heapBefore;
    long scratchGrowth = scratchAfter - scratchBefore;
    long nativeGrowth = (mallocAfter - mallocBefore) - scratchGrowth;
    double heapBytes = (double) heapGrowth / o.n;
    double nativeBytes = (double) nativeGrowth / o.n;
    String c = "jvm/bytes-per-wrapper/N=" + o.n;
    String detail = "\"heap_growth\": " + heapGrowth + ", \"malloc_growth\": " + (mallocAfter - mallocBefore)
        + ", \"jvm_scratch_growth\": " + scratchGrowth;
    Row.print(c, o.variant, 1, "bytes", heapBytes + nativeBytes, detail);
    Row.print(c, o.variant, 1, "heap_bytes", heapBytes, detail);
    Row.print(c, o.variant, 1, "native_bytes", nativeBytes, detail);
  }

  /**
   * Two full collections, with (given a variant) the wait for its cleanups in between: the
   * second collection finds what the first one's cleanups released (a cleanup's
   * PhantomReference is garbage only once the cleanup thread ran it).
   */
  private static void settle(Variant variant) {
    System.gc();
    if (variant != null) WrapperRounds.awaitCleanedUp(variant, "settle");
    System.gc();
  }

  private static long heapUsed(MemoryMXBean memory) {
    return memory.getHeapMemoryUsage().getUsed();
  }

  private static int[] identity(int n) {
    int[] order = new int[n];
    for (int i = 0; i < n; i++) order[i] = i;
    return order;
  }
}

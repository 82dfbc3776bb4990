// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One wrapper per native object under 8 Java threads, while wrappers die and are replaced.
 *
 * <p>Rounds separated by a barrier. In a round, every thread asks for the wrappers of every
 * native in one order (so that 8 threads race to make each wrapper that died), then of random
 * natives, and checks that two asks in a row give one object, that it wraps the right pointer,
 * that {@code of(pointer)} finds it, and that it is the wrapper every other thread got for
 * that native in this round: the first thread to get one stores it in the round's array,
 * which keeps it alive to the round's end, so any other wrapper seen for that native while it
 * lives is a duplicate (whichever of the two asks came first, the other wrapper was alive at
 * it). Between rounds the array is dropped and the collector runs (System.gc(), and the
 * threads' own garbage makes young collections run inside rounds): the last round's wrappers
 * die while the next round asks for the same natives, so the sweeps race with lookups that
 * find weak references cleared and make new wrappers, which replace the dying entries.
 *
 * <p>At the end every wrapper is dropped, and each wrapper that was cached must have left the
 * cache exactly once, swept or replaced while dying, leaving no entry and no weak reference.
 */
final class IdentityUnderThreads {
  private static final int THREADS = 8;
  private static final int NATIVES = 512;
  private static final int ROUNDS = 64 * Scale.FACTOR;
  private static final int GETS_PER_ROUND = 2_000;
  // Rounds stop early past this (the count done is reported); at least 2 must run, the second
  // being the first whose lookups meet dying wrappers.
  private static final long ROUNDS_BUDGET_NANOS = 20_000_000_000L * Scale.FACTOR;

  private final long handle;
  private final long[] pointers = new long[NATIVES];
  private final CyclicBarrier barrier;
  private final long deadline = System.nanoTime() + ROUNDS_BUDGET_NANOS;
  // Replaced by the barrier's action between rounds; read by the threads after the barrier.
  private volatile AtomicReferenceArray<Wrapper> roundWrappers = new AtomicReferenceArray<>(NATIVES);
  private volatile boolean stop;
  private int roundsDone; // written by the barrier action only, read after the joins
  private final AtomicLong gets = new AtomicLong();
  private final AtomicLong unstable = new AtomicLong(); // at(h,i) != at(h,i)
  private final AtomicLong duplicated = new AtomicLong(); // another wrapper than the round's
  private final AtomicLong wrongNative = new AtomicLong(); // wrapper.pointer != pointerAt(h,i)
  private final AtomicLong notFound = new AtomicLong(); // of(pointer) != the live wrapper
  private final AtomicReference<Throwable> failure = new AtomicReference<>();

  private IdentityUnderThreads(long handle) {
    this.handle = handle;
    for (int i = 0; i < NATIVES; ++i) {
      pointers[i] = NativeObjects.pointerAt(handle, i);
    }
    barrier = new CyclicBarrier(THREADS, this::betweenRounds);
  }

  private void betweenRounds() {
    ++roundsDone;
    if (roundsDone >= ROUNDS || System.nanoTime() - deadline > 0) {
      stop = true;
    }
    roundWrappers = new AtomicReferenceArray<>(NATIVES); // the last round's wrappers may die now
    System.gc();
  }

  private void worker() {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    Object[] ring = new Object[64]; // this thread's garbage, overwritten in turn
    try {
      while (!stop) {
        AtomicReferenceArray<Wrapper> round = roundWrappers;
        // Every thread first walks the natives in one order, all starting together after the
        // barrier: the first asks for a native whose wrapper died are misses that the threads
        // race to fill. Then random natives.
        for (int k = 0; k < NATIVES + GETS_PER_ROUND; ++k) {
          int i = k < NATIVES ? k : random.nextInt(NATIVES);
          Wrapper a = WrapperCache.at(handle, i);
          Wrapper b = WrapperCache.at(handle, i);
          if (a != b) {
            unstable.incrementAndGet();
          }
          if (a.pointer != pointers[i]) {
            wrongNative.incrementAndGet();
          }
          if (WrapperCache.of(pointers[i]) != a) {
            notFound.incrementAndGet();
          }
          Wrapper first = round.compareAndExchange(i, null, a);
          if (first != null && first != a) {
            duplicated.incrementAndGet();
          }
          if ((k & 15) == 0) {
            ring[(k >> 4) & 63] = new byte[8 * 1024]; // young collections inside rounds
          }
        }
        gets.addAndGet(2L * (NATIVES + GETS_PER_ROUND));
        if (failure.get() != null) {
          return; // another thread failed: the barrier was reset, nobody comes
        }
        barrier.await(GcDriver.TIMEOUT_MILLIS, TimeUnit.MILLISECONDS);
      }
    } catch (Throwable t) {
      failure.compareAndSet(null, t);
      stop = true;
      barrier.reset(); // the others' await() throws: none waits for this thread
    }
  }

  /** Runs the case; throws AssertionError saying what was lost or duplicated. */
  static void run() throws InterruptedException {
    Check.noWrappersLeft("identity: at the start");
    final long handle = NativeObjects.create(NATIVES);
    final long created0 = HostProbe.weakRefsCreated();
    final long racesLost0 = HostProbe.racesLost();
    final long deadReplaced0 = HostProbe.deadReplaced();
    final long removed0 = HostProbe.sweptByThread();
    IdentityUnderThreads test = new IdentityUnderThreads(handle);
    Thread[] threads = new Thread[THREADS];
    for (int t = 0; t < THREADS; ++t) {
      threads[t] = new Thread(test::worker, "identity-" + t);
      threads[t].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    Throwable failed = test.failure.get();
    if (failed != null && !(failed instanceof BrokenBarrierException)) {
      throw new AssertionError("identity: a thread failed", failed);
    }
    if (failed != null) {
      throw new AssertionError("identity: the barrier broke (a thread stopped)", failed);
    }
    final long made = HostProbe.weakRefsCreated() - created0;
    final long racesLost = HostProbe.racesLost() - racesLost0;
    final long cached = made - racesLost; // a lost race's wrapper is made, then dropped
    final long deadReplaced = HostProbe.deadReplaced() - deadReplaced0;
    final String counts = "identity: " + THREADS + " threads, " + test.roundsDone + " of " + ROUNDS
        + " rounds, " + test.gets.get() + " gets: " + test.duplicated.get() + " duplicated, "
        + test.unstable.get() + " unstable, " + test.wrongNative.get() + " wrong native, "
        + test.notFound.get() + " not found by of(); " + cached + " wrappers cached ("
        + racesLost + " creation races lost, " + deadReplaced + " dying entries replaced)";
    System.out.println(counts);
    Check.equal(0, test.duplicated.get(), "identity: two live wrappers for one native (" + counts + ")");
    Check.equal(0, test.unstable.get(), "identity: at(h,i) != at(h,i) (" + counts + ")");
    Check.equal(0, test.wrongNative.get(), "identity: a wrapper of another native (" + counts + ")");
    Check.equal(0, test.notFound.get(), "identity: of() missed a live wrapper (" + counts + ")");
    Check.that(test.roundsDone >= 2, "identity: fewer than 2 rounds in the time budget (" + counts + ")");

    test = null; // every wrapper unreachable now: the threads ended, the round's array goes
    // Each cached wrapper leaves the cache once: replaced while dying, or swept.
    GcDriver.untilRemoved(removed0 + cached - deadReplaced, "identity: after the last round");
    final long swept = HostProbe.sweptByThread() - removed0;
    Check.equal(cached - deadReplaced, swept,
        "identity: entries swept (more: a wrapper removed twice; " + deadReplaced + " replaced while dying)");
    Check.noWrappersLeft("identity: every wrapper collected and swept");
    NativeObjects.destroy(handle);
    System.out.println("identity: all " + cached + " cached wrappers removed once (" + swept + " swept, "
        + deadReplaced + " replaced while dying); 0 entries and 0 weak references left");
  }
}

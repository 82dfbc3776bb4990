// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;

/**
 * The removal of collected wrappers from the identity cache: a daemon thread
 * ("palrt-jvmhost-sweeper") that calls the native sweep() once after each collection, which
 * removes the entries whose JNI weak global reference the collector cleared and deletes those
 * references (palrt::jni::identity_cache::sweep; palrt/jni/identity_cache.hpp says why a sweep
 * and not a cleanup per wrapper).
 *
 * <p>How the thread learns that a collection ran: a canary, a {@link WeakReference} to a fresh
 * object that nothing else references, on a queue of its own. The next collection that looks at
 * young objects clears it and the JDK's reference handler queues it, which wakes the thread.
 * The thread makes the next canary before it sweeps, so that a collection that runs during the
 * sweep (and may clear wrappers the sweep already passed) wakes it again. A young collection
 * clears the canary, so a wrapper that dies in the old generation is swept after the
 * collection that clears it, at the latest at the next young one after that. No JMX listener
 * (java.lang.management's GC notifications would do the same for the price of loading the
 * management classes into every process that uses the binding), no polling.
 *
 * <p>Per wrapper this costs nothing while it lives (no Java object besides the wrapper) and,
 * when it dies, its share of one sweep.
 */
final class WrapperSweeper {
  private static final ReferenceQueue<Object> COLLECTED = new ReferenceQueue<>();
  // Progress, for the suite's waits (HostProbe.awaitSweeps, awaitRemoved).
  private static final Object PROGRESS = new Object();
  private static long sweeps; // guarded by PROGRESS: sweeps run by this thread
  private static long removed; // guarded by PROGRESS: entries they removed

  static {
    Binding.load();
    Thread thread = new Thread(WrapperSweeper::run, "palrt-jvmhost-sweeper");
    thread.setDaemon(true); // it must not keep the JVM alive: the JVM frees what is left
    thread.start();
  }

  private WrapperSweeper() {}

  /** Starts the thread (class initialisation), once: WrapperCache's initialiser calls it. */
  static void start() {}

  private static void run() {
    // Held in this frame: the canary itself must stay reachable to be queued once cleared.
    WeakReference<Object> canary = new WeakReference<>(new Object(), COLLECTED);
    for (;;) {
      try {
        COLLECTED.remove();
      } catch (InterruptedException e) {
        continue; // nobody should interrupt a thread of the binding: go on watching
      }
      canary = new WeakReference<>(new Object(), COLLECTED);
      final long n = sweep();
      synchronized (PROGRESS) {
        ++sweeps;
        removed += n;
        PROGRESS.notifyAll();
      }
    }
  }

  /** Sweeps run by the thread so far. */
  static long sweeps() {
    synchronized (PROGRESS) {
      return sweeps;
    }
  }

  /** Entries the thread's sweeps removed so far. */
  static long removed() {
    synchronized (PROGRESS) {
      return removed;
    }
  }

  /**
   * Waits until the thread's sweeps removed at least {@code count} entries in all, or
   * {@code timeoutMillis} passed: true if they did.
   */
  static boolean awaitRemoved(long count, long timeoutMillis) throws InterruptedException {
    final long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
    synchronized (PROGRESS) {
      for (long left = timeoutMillis * 1_000_000L; removed < count && left > 0; left = deadline - System.nanoTime()) {
        PROGRESS.wait(left / 1_000_000L, (int) (left % 1_000_000L));
      }
      return removed >= count;
    }
  }

  /**
   * Waits until the thread ran more than {@code count} sweeps in all, or {@code timeoutMillis}
   * passed: true if it did.
   */
  static boolean awaitSweepsPast(long count, long timeoutMillis) throws InterruptedException {
    final long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
    synchronized (PROGRESS) {
      for (long left = timeoutMillis * 1_000_000L; sweeps <= count && left > 0; left = deadline - System.nanoTime()) {
        PROGRESS.wait(left / 1_000_000L, (int) (left % 1_000_000L));
      }
      return sweeps > count;
    }
  }

  /**
   * Removes the entries of collected wrappers and deletes their weak references (and those of
   * the dying wrappers replaced since the last sweep), after a grace period it waits for: how
   * many entries it removed. Thread-safe: the suite calls it too. 0 after WrapperCache.close().
   */
  static native long sweep();
}

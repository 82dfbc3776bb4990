// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;

/**
 * The cleanup of one cached wrapper: once the collector finds the wrapper unreachable, the
 * binding's cleanup thread ("palrt-jvmhost-cleanup", a daemon) calls the native
 * forget(pointer, weak), which removes the wrapper's entry from the identity cache if it is
 * still that wrapper's and deletes the cache's weak global reference after a grace period.
 *
 * <p>Protocol, with WrapperCache.at() and its natives (wrapper_cache.cpp):
 * <ol>
 *   <li>at()'s miss: {@code new Wrapper(pointer)}, then {@code new WrapperCleanup(wrapper,
 *       pointer)}, not tracked yet, then publish() caches the wrapper. If it is not cached
 *       (another thread's won the race, or an exception), nothing keeps the cleanup reachable:
 *       it is collected with the wrapper, or, if a collection finds the wrapper dead while
 *       at()'s frame still holds the cleanup, enqueued untracked, and then it does nothing.
 *   <li>publish() cached the wrapper: it stores the token's weak reference into
 *       {@code weak} (a JNI field write), and at() then calls {@link #track}, which links the
 *       cleanup into the list that keeps it reachable, under LIST's lock.
 *   <li>The wrapper becomes unreachable: the collector clears the cache's weak reference and
 *       this phantom reference together (JNI: a weak global reference becomes null when a
 *       PhantomReference to the same object would be cleared) and enqueues this.
 *   <li>The cleanup thread unlinks it under LIST's lock, which also orders step 2's write of
 *       {@code weak} (before track() took the lock, on at()'s thread) before its read, and
 *       calls forget(pointer, weak), for a batch of cleanups in one JNI call.
 * </ol>
 * Between 3 and 4 the wrapper is dying: at() finds its weak reference cleared and makes a new
 * wrapper, which replaces it in the entry; forget() then leaves that entry alone (palrt's
 * jni/identity_cache.hpp, "Dying wrappers").
 *
 * <p>Why not {@code java.lang.ref.Cleaner}: it is the same mechanism (a PhantomReference
 * subclass on a ReferenceQueue, kept reachable by a doubly-linked list under one lock, drained
 * by a thread of its own), but per registration it allocates a PhantomCleanableRef with three
 * list fields (prev, next, list) and the action, plus the action itself, a Runnable holding the
 * two longs of the token: two objects, 48 + 32 = 80 bytes of Java heap on a 64-bit JVM with
 * compressed pointers. This class is the PhantomReference and the token in one object of 56
 * bytes (the Reference's 4 fields, the 2 longs and the list's 2 links): 24 bytes less per
 * wrapper, whose own size is 24. CleanupFootprint (the jvm-host-cleanup-footprint test)
 * measures both on real wrappers (OpenJDK 17, G1 and Serial: 56.0 and 80.0) and fails if this
 * one is not the lighter. The single list lock is Cleaner's too; it is taken once per wrapper
 * made and once per batch of cleanups, never on a hit. And owning the thread lets it forget a
 * batch of tokens per JNI call, and {@link #settle} after each burst of cleanups, which a
 * Cleaner action cannot know it ends.
 */
final class WrapperCleanup extends PhantomReference<Wrapper> {
  private static final ReferenceQueue<Wrapper> QUEUE = new ReferenceQueue<>();
  // The tracked cleanups, a circular doubly-linked list through this sentinel: a phantom
  // reference is enqueued only while it is reachable itself, so each must be held until it
  // ran, and a link pair is the cheapest holder that removes in O(1) from any position.
  private static final WrapperCleanup LIST = new WrapperCleanup();
  // Progress of the cleanup thread, for the tests' waits (HostProbe.awaitSettled).
  private static final Object SETTLED = new Object();
  private static long settled; // guarded by SETTLED: cleanups run and settled
  // Cleanups forgotten per JNI call: the JNI transition is shared by a batch, and LIST's lock
  // is taken once per batch; a miss's track() waits at most for one batch's unlinks.
  private static final int BATCH = 64;

  static {
    Binding.load();
    Thread thread = new Thread(WrapperCleanup::drain, "palrt-jvmhost-cleanup");
    thread.setDaemon(true); // it must not keep the JVM alive: the JVM frees what is left
    thread.start();
  }

  private final long pointer;
  // Written by WrapperCache.publish() (JNI) before track(); read under LIST after unlinking.
  private long weak;
  private WrapperCleanup prev; // guarded by LIST; null unless tracked
  private WrapperCleanup next; // guarded by LIST; null unless tracked

  /** WrapperCache.at()'s miss: the cleanup of a wrapper not cached yet. */
  WrapperCleanup(Wrapper wrapper, long pointer) {
    super(wrapper, QUEUE);
    this.pointer = pointer;
  }

  private WrapperCleanup() { // LIST's sentinel: never enqueued (no referent, no queue)
    super(null, null);
    pointer = 0;
    prev = this;
    next = this;
  }

  /**
   * Called by WrapperCache.at() once publish() cached this cleanup's wrapper and stored its
   * token's weak reference. Allocates nothing, so it cannot fail with OutOfMemoryError after
   * the wrapper was cached.
   */
  void track() {
    synchronized (LIST) {
      prev = LIST;
      next = LIST.next;
      LIST.next.prev = this;
      LIST.next = this;
    }
  }

  private static void drain() {
    final WrapperCleanup[] taken = new WrapperCleanup[BATCH];
    final long[] tokens = new long[2 * BATCH];
    long cleaned = 0;
    for (;;) {
      Reference<? extends Wrapper> r;
      try {
        r = QUEUE.remove();
      } catch (InterruptedException e) {
        continue; // nobody should interrupt a thread of the binding: go on serving the queue
      }
      // A burst: batches until the queue stays empty, then one settle().
      while (r != null) {
        int n = 0;
        do {
          taken[n++] = (WrapperCleanup) r;
        } while (n < BATCH && (r = QUEUE.poll()) != null);
        cleaned += forget(taken, n, tokens);
        if ((r = QUEUE.poll()) == null) {
          r = pollBriefly();
        }
      }
      settle();
      synchronized (SETTLED) {
        settled = cleaned;
        SETTLED.notifyAll();
      }
    }
  }

  /**
   * Unlinks the {@code n} cleanups of {@code taken} (clearing it) and forgets the tokens of
   * those that were tracked, in one JNI call: how many were.
   */
  private static int forget(WrapperCleanup[] taken, int n, long[] tokens) {
    int tracked = 0;
    synchronized (LIST) {
      for (int k = 0; k < n; ++k) {
        WrapperCleanup c = taken[k];
        taken[k] = null; // the array must not keep a cleanup reachable past its batch
        if (c.next == null) {
          continue; // never tracked: a wrapper that was not cached
        }
        c.prev.next = c.next;
        c.next.prev = c.prev;
        c.prev = null;
        c.next = null;
        tokens[2 * tracked] = c.pointer;
        tokens[2 * tracked + 1] = c.weak;
        ++tracked;
      }
    }
    if (tracked > 0) {
      forget(tokens, tracked);
    }
    return tracked;
  }

  // How long the queue must stay empty before a burst is over (pollBriefly).
  private static final long BURST_GAP_NANOS = 20_000L;

  /**
   * The next cleanup if one is enqueued within BURST_GAP_NANOS, else null. The JDK's reference
   * handler enqueues a collection's cleared references one at a time, and this thread,
   * forgetting a batch per JNI call, catches up with it, most of all when the two share a CPU
   * with others; each time the queue looked empty then, a settle() would wait for a grace
   * period (a process-wide barrier: microseconds, tens of them on a virtual machine) that the
   * rest of the burst makes moot. A spin shorter than one barrier lets the handler deliver
   * the rest first (on the churn benchmark, from 2 to 11 settles per collection to 1 or 2). Not
   * ReferenceQueue.remove(timeout): its timeout is in milliseconds, and it parks, so that
   * each burst would end a millisecond late.
   */
  private static Reference<? extends Wrapper> pollBriefly() {
    final long start = System.nanoTime();
    Reference<? extends Wrapper> r;
    while ((r = QUEUE.poll()) == null && System.nanoTime() - start < BURST_GAP_NANOS) {
      Thread.onSpinWait();
    }
    return r;
  }

  /** Cleanups of tracked wrappers run so far and settled (see {@link #settle}). */
  static long settled() {
    synchronized (SETTLED) {
      return settled;
    }
  }

  /**
   * Waits until at least {@code count} cleanups ran and settled, or {@code timeoutMillis}
   * passed: true if they did.
   */
  static boolean awaitSettled(long count, long timeoutMillis) throws InterruptedException {
    final long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
    synchronized (SETTLED) {
      for (long left = timeoutMillis * 1_000_000L; settled < count && left > 0;
          left = deadline - System.nanoTime()) {
        SETTLED.wait(left / 1_000_000L, (int) (left % 1_000_000L));
      }
      return settled >= count;
    }
  }

  /**
   * forget(pointer, weak) of the first {@code count} tokens, {@code tokens[2k]} and
   * {@code tokens[2k + 1]}: removes each entry if it still maps its pointer to its weak
   * reference, and deletes that reference after a grace period.
   */
  private static native void forget(long[] tokens, int count);

  /**
   * After a burst of forget() calls: waits (palrt::gc::drain_retired) until the weak global
   * references they retired are deleted. palrt batches retirements per thread, and a partial
   * batch is queued only when the thread retires 64, exits, or drains: without this, up to 63
   * dead wrappers' weak references would wait for the next burst, and close() (which drains
   * what is queued) would not see them. After it, liveWeakRefs() is exact while this thread
   * is idle.
   */
  private static native void settle();
}

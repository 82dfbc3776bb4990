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
 * <p>Protocol, with the binding's at() (wrapper_cache.cpp):
 * <ol>
 *   <li>make(): {@code new Wrapper(pointer)}, then {@code new WrapperCleanup(wrapper, pointer)},
 *       not tracked yet. If the wrapper is not cached (another thread's won the race, or an
 *       exception), nothing keeps the cleanup reachable: it is collected with the wrapper, or,
 *       if a collection finds the wrapper dead while make()'s local reference still holds the
 *       cleanup, enqueued without a token, and then it does nothing.
 *   <li>get() cached the wrapper: {@link #track} stores the token's weak reference and links
 *       the cleanup into the list that keeps it reachable, under LIST's lock.
 *   <li>The wrapper becomes unreachable: the collector clears the cache's weak reference and
 *       this phantom reference together (JNI: a weak global reference becomes null when a
 *       PhantomReference to the same object would be cleared) and enqueues this.
 *   <li>The cleanup thread unlinks it under LIST's lock, which also orders step 2's write of
 *       {@code weak} before its read, and calls forget(pointer, weak).
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
 * made and once per wrapper cleaned, never on a hit. And owning the thread lets it {@link
 * #settle} after each burst of cleanups, which a Cleaner action cannot know it ends.
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

  static {
    Binding.load();
    Thread thread = new Thread(WrapperCleanup::drain, "palrt-jvmhost-cleanup");
    thread.setDaemon(true); // it must not keep the JVM alive: the JVM frees what is left
    thread.start();
  }

  private final long pointer;
  private long weak; // guarded by LIST; 0 until tracked
  private WrapperCleanup prev; // guarded by LIST; null unless tracked
  private WrapperCleanup next; // guarded by LIST; null unless tracked

  /** Called by the binding's make(), through JNI: the cleanup of a wrapper not cached yet. */
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
   * Called by the binding, through JNI, once get() cached this cleanup's wrapper: {@code weak}
   * is the token's weak global reference. Allocates nothing, so it cannot fail with
   * OutOfMemoryError after the wrapper was cached.
   */
  void track(long weak) {
    synchronized (LIST) {
      this.weak = weak;
      prev = LIST;
      next = LIST.next;
      LIST.next.prev = this;
      LIST.next = this;
    }
  }

  /** On the cleanup thread: forgets the token, if this cleanup was tracked. */
  private boolean clean() {
    long token;
    synchronized (LIST) {
      if (next == null) {
        return false; // never tracked: a wrapper that was not cached
      }
      token = weak;
      prev.next = next;
      next.prev = prev;
      prev = null;
      next = null;
    }
    forget(pointer, token);
    return true;
  }

  private static void drain() {
    long cleaned = 0;
    for (;;) {
      Reference<? extends Wrapper> r;
      try {
        r = QUEUE.remove();
      } catch (InterruptedException e) {
        continue; // nobody should interrupt a thread of the binding: go on serving the queue
      }
      do {
        if (((WrapperCleanup) r).clean()) {
          ++cleaned;
        }
      } while ((r = QUEUE.poll()) != null);
      settle();
      synchronized (SETTLED) {
        settled = cleaned;
        SETTLED.notifyAll();
      }
    }
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

  private static native void forget(long pointer, long weak);

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

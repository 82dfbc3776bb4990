// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;

import palrt.jvmhost.NativeObjects;
import palrt.jvmhost.Wrapper;

/**
 * The {@code jni-weak-floor} variant, churn case only: not an identity cache but the floor under
 * every binding that holds its wrappers through JNI weak global references and removes each
 * with a cleanup of its own (mutex-map's way, and the palrt binding's before it swept after
 * collections instead: a binding that sweeps has no cleanup and goes below this floor). What
 * such a binding cannot avoid on a miss, and nothing else, is done here:
 *
 * <ul>
 *   <li>{@link #at}: the pointer (NativeObjects.pointerAt, as chm reads it), the wrapper and
 *       its cleanup made in Java (as a binding's miss path in Java makes them), one JNI
 *       call that makes the wrapper's weak global reference ({@link #newWeak}), stored in the
 *       cleanup, and the cleanup tracked. No map, no lookup: every call is a miss, and two
 *       calls for one object make two wrappers, which is why no other case may run it.
 *   <li>The cleanup: mutex-map's mechanism and shape, a PhantomReference
 *       subclass holding the pointer and the weak reference, kept reachable in a doubly-linked
 *       list under one lock, drained by a daemon thread of its own that unlinks a batch of up
 *       to 64 under the lock and deletes their references in one native call
 *       ({@link #forget}: DeleteWeakGlobalRef each, at once, with no grace period, since no
 *       lookup can be reading them). No settle() and no brief poll for the rest of a burst:
 *       both exist in the binding to wait out grace periods, which this has none of.
 * </ul>
 *
 * What the churn case then measures is the mechanism's own cost, per wrapper: two JNI
 * transitions on the miss (pointerAt included, which chm pays too), a weak global reference
 * made and deleted, a phantom reference for the collector to discover, clear and hand over, and
 * the list and thread that run it. If that alone costs more than chm's whole churn, no binding
 * holding wrappers through JNI weak global references can match chm there, however fast its map.
 */
final class JniWeakFloor {
  static {
    BenchLibrary.load();
  }

  // Wrapper(long): the binding's constructor (package-private: only the binding makes
  // wrappers), called as ChmWrapperCache calls it, through a constant method handle, which C2
  // inlines to the allocation and the constructor, what the binding's own `new Wrapper` is.
  private static final MethodHandle NEW_WRAPPER;

  static {
    try {
      NEW_WRAPPER = MethodHandles.privateLookupIn(Wrapper.class, MethodHandles.lookup())
          .findConstructor(Wrapper.class, MethodType.methodType(void.class, long.class));
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private JniWeakFloor() {}

  /** A new wrapper of object {@code index} of {@code handle}, never a cached one: see above. */
  static Wrapper at(long handle, int index) {
    final long pointer = NativeObjects.pointerAt(handle, index);
    final Wrapper wrapper = newWrapper(pointer);
    final Cleanup cleanup = new Cleanup(wrapper, pointer);
    // If newWeak throws (OutOfMemoryError), the cleanup is never tracked, and it becomes garbage
    // with the wrapper: no reference was made, so none leaks.
    cleanup.weak = newWeak(wrapper);
    // Written before track() takes LIST's lock, read by the cleanup thread under it.
    cleanup.track();
    return wrapper;
  }

  private static Wrapper newWrapper(long pointer) {
    try {
      return (Wrapper) NEW_WRAPPER.invokeExact(pointer);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {  // Wrapper's constructor declares no checked exception
      throw new AssertionError(t);
    }
  }

  /**
   * Weak global references made and not deleted yet: one per wrapper whose cleanup has not run
   * to its end. Reads two counters (relaxed atomics), takes no lock: the churn case polls it
   * while the cleanup thread works.
   */
  static native long liveWeakRefs();

  /** NewWeakGlobalRef(wrapper), as a token: one JNI transition. */
  private static native long newWeak(Wrapper wrapper);

  /** DeleteWeakGlobalRef of {@code weaks[0 .. count)}: one JNI transition for a batch. */
  private static native void forget(long[] weaks, int count);

  /** One wrapper's cleanup, MutexMapWrapperCache's shape (56 bytes) and protocol. */
  private static final class Cleanup extends PhantomReference<Wrapper> {
    private static final ReferenceQueue<Wrapper> QUEUE = new ReferenceQueue<>();
    // The tracked cleanups, a circular doubly-linked list through this sentinel: a phantom
    // reference is enqueued only while it is reachable itself, so each must be held until it
    // ran.
    private static final Cleanup LIST = new Cleanup();
    // Cleanups per native call and per hold of LIST's lock.
    private static final int BATCH = 64;

    static {
      Thread thread = new Thread(Cleanup::drain, "jvmbench-jni-weak-floor-cleanup");
      thread.setDaemon(true); // it must not keep the JVM alive
      thread.start();
    }

    // The token. forget() needs the weak reference only; the pointer is kept so that the
    // object is the binding's size, which the collector copies and scans as it does the
    // binding's.
    @SuppressWarnings("unused")
    private final long pointer;
    private long weak; // written by at() before track(); read under LIST after unlinking
    private Cleanup prev; // guarded by LIST; null unless tracked
    private Cleanup next; // guarded by LIST; null unless tracked

    Cleanup(Wrapper wrapper, long pointer) {
      super(wrapper, QUEUE);
      this.pointer = pointer;
    }

    private Cleanup() { // LIST's sentinel: never enqueued (no referent, no queue)
      super(null, null);
      pointer = 0;
      prev = this;
      next = this;
    }

    void track() {
      synchronized (LIST) {
        prev = LIST;
        next = LIST.next;
        LIST.next.prev = this;
        LIST.next = this;
      }
    }

    private static void drain() {
      final Cleanup[] taken = new Cleanup[BATCH];
      final long[] weaks = new long[BATCH];
      for (;;) {
        Reference<? extends Wrapper> r;
        try {
          r = QUEUE.remove();
        } catch (InterruptedException e) {
          continue; // nobody should interrupt the library's thread: go on serving the queue
        }
        while (r != null) {
          int n = 0;
          do {
            taken[n++] = (Cleanup) r;
          } while (n < BATCH && (r = QUEUE.poll()) != null);
          forget(taken, n, weaks);
          r = QUEUE.poll();
        }
      }
    }

    /**
     * Unlinks the {@code n} cleanups of {@code taken} (clearing it) and deletes the weak
     * references of those that were tracked, in one JNI call.
     */
    private static void forget(Cleanup[] taken, int n, long[] weaks) {
      int tracked = 0;
      synchronized (LIST) {
        for (int k = 0; k < n; ++k) {
          Cleanup c = taken[k];
          taken[k] = null; // the array must not keep a cleanup reachable past its batch
          if (c.next == null) {
            continue; // never tracked: newWeak failed, no reference to delete
          }
          c.prev.next = c.next;
          c.next.prev = c.prev;
          c.prev = null;
          c.next = null;
          weaks[tracked++] = c.weak;
        }
      }
      if (tracked > 0) {
        JniWeakFloor.forget(weaks, tracked);
      }
    }
  }
}

// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;

import palrt.jvmhost.Wrapper;

/**
 * The `mutex-map` baseline, the Java half: the side table a C++ binding writes first, a
 * {@code std::unordered_map<const void*, jweak>} under one {@code std::mutex}, in
 * libpalrt_jvmbench.so (mutex_map_cache.cpp says what each native does under the lock).
 *
 * <p>A wrapper's entry is removed by a cleanup per wrapper, as side-table bindings do (and as
 * the palrt binding did before it swept after collections instead): a PhantomReference
 * subclass carrying the token (pointer, weak global reference), lighter than a
 * java.lang.ref.Cleaner registration, kept reachable in a doubly-linked list under one lock,
 * drained by a daemon thread of the library that calls the native {@link #forget}. It is registered once the wrapper is cached, from
 * {@code at}'s native miss path ({@link #track}); forget() deletes the weak reference at once
 * (its lookups read weak references only under the mutex), where palrt's waits for a grace
 * period.
 */
final class MutexMapWrapperCache {
  static {
    BenchLibrary.load();
  }

  private MutexMapWrapperCache() {}

  /**
   * The wrapper of object {@code index} of {@code palrt.jvmhost.NativeObjects} {@code handle}
   * (one JNI transition): the cached one while it lives, otherwise a new one, cached.
   */
  static native Wrapper at(long handle, int index);

  /** The map's entries (under its mutex): one per wrapper whose cleanup has not run. */
  static native long entries();

  /**
   * The map's entries as of its last change, read without the mutex: for a thread that polls
   * for the cleanups to end without contending with them.
   */
  static native long entriesSeen();

  private static native void forget(long pointer, long weak);

  /**
   * Called by {@code at} from native code on a miss, once the new wrapper's entry is in the
   * map, with no lock held (this runs Java code). The caller's local reference holds the
   * wrapper meanwhile, so it cannot die before its cleanup exists. If this throws
   * (OutOfMemoryError), {@code at} takes the entry back.
   */
  @SuppressWarnings("unused") // called through JNI
  private static void track(Wrapper wrapper, long weak) {
    new Cleanup(wrapper, weak).link();
  }

  /** One cached wrapper's cleanup: a PhantomReference that is the token. */
  private static final class Cleanup extends PhantomReference<Wrapper> {
    private static final ReferenceQueue<Wrapper> QUEUE = new ReferenceQueue<>();
    // The linked cleanups, a circular list through this sentinel: a phantom reference is
    // enqueued only while it is reachable itself, so each must be held until it ran.
    private static final Cleanup LIST = new Cleanup();

    static {
      Thread thread = new Thread(Cleanup::drain, "jvmbench-mutex-map-cleanup");
      thread.setDaemon(true); // it must not keep the JVM alive
      thread.start();
    }

    // The token: it must not hold the wrapper, or the wrapper would never become unreachable.
    private final long pointer;
    private final long weak;
    private Cleanup prev; // guarded by LIST
    private Cleanup next; // guarded by LIST

    Cleanup(Wrapper wrapper, long weak) {
      super(wrapper, QUEUE);
      this.pointer = wrapper.pointer;
      this.weak = weak;
    }

    private Cleanup() { // LIST's sentinel: never enqueued (no referent, no queue)
      super(null, null);
      pointer = 0;
      weak = 0;
      prev = this;
      next = this;
    }

    void link() {
      synchronized (LIST) {
        prev = LIST;
        next = LIST.next;
        LIST.next.prev = this;
        LIST.next = this;
      }
    }

    private void clean() {
      synchronized (LIST) {
        prev.next = next;
        next.prev = prev;
        prev = null;
        next = null;
      }
      forget(pointer, weak);
    }

    private static void drain() {
      for (;;) {
        Reference<? extends Wrapper> r;
        try {
          r = QUEUE.remove();
        } catch (InterruptedException e) {
          continue; // nobody should interrupt the library's thread: go on serving the queue
        }
        do {
          ((Cleanup) r).clean();
        } while ((r = QUEUE.poll()) != null);
      }
    }
  }
}

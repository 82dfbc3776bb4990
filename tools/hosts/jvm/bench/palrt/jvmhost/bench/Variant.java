// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.util.List;

import palrt.jvmhost.NativeObjects;
import palrt.jvmhost.Wrapper;
import palrt.jvmhost.WrapperCache;

/**
 * One way of getting a native object's wrapper, written as its users write it, each paying
 * one JNI transition per hit. A JVM runs one variant (one process per measurement), so the
 * benchmark's call site sees one receiver class and C2 inlines {@link #at} into the loop.
 */
interface Variant {
  /** The wrapper of object {@code index} of the NativeObjects array {@code handle}. */
  Wrapper at(long handle, int index);

  /** Entries the cache holds: one per wrapper whose cleanup has not run. */
  long entries();

  /**
   * Weak references the cache still holds: its entries', and those of collected wrappers not
   * deleted yet. Zero once every collected wrapper's cleanup has run to its end. Where
   * cleanups run on the caller's thread (chm: its miss path expunges), this first runs them
   * as that miss path would.
   */
  long heldReferences();

  List<String> NAMES = List.of("palrt", "chm", "mutex-map", "jni-weak-floor");

  /** Not an identity cache (every lookup makes a wrapper): the churn case's floor only. */
  String FLOOR = "jni-weak-floor";

  static Variant named(String name) {
    switch (name) {
      case "palrt": return new Palrt();
      case "chm": return new Chm();
      case "mutex-map": return new MutexMap();
      case "jni-weak-floor": return new Floor();
      default: throw new IllegalArgumentException("unknown variant '" + name + "' (" + String.join(", ", NAMES) + ")");
    }
  }

  /** palrt's identity cache through the JVM host (JNI weak global references, grace_period). */
  final class Palrt implements Variant {
    @Override
    public Wrapper at(long handle, int index) {
      return WrapperCache.at(handle, index);
    }

    @Override
    public long entries() {
      return WrapperCache.entries();
    }

    @Override
    public long heldReferences() {
      // The binding's sweeper thread removes the entries after the collection and deletes
      // their weak references after a grace period, which it waits for (WrapperSweeper).
      return WrapperCache.liveWeakRefs();
    }
  }

  /** The pure-Java idiom: the native accessor returns the pointer, the map is Java's. */
  final class Chm implements Variant {
    private final ChmWrapperCache cache = new ChmWrapperCache();

    @Override
    public Wrapper at(long handle, int index) {
      return cache.of(NativeObjects.pointerAt(handle, index));
    }

    @Override
    public long entries() {
      return cache.entries();
    }

    @Override
    public long heldReferences() {
      cache.expungeStale();
      return cache.entries();  // a WeakReference per entry
    }
  }

  /** The C++ side table under a std::mutex (libpalrt_jvmbench.so). */
  final class MutexMap implements Variant {
    @Override
    public Wrapper at(long handle, int index) {
      return MutexMapWrapperCache.at(handle, index);
    }

    @Override
    public long entries() {
      return MutexMapWrapperCache.entries();
    }

    @Override
    public long heldReferences() {
      // forget() deletes the weak reference with the entry. Polled: read without the mutex.
      return MutexMapWrapperCache.entriesSeen();
    }
  }

  /**
   * The floor of the JNI weak global reference mechanism, no map (JniWeakFloor.java): every
   * call makes a wrapper, so it is an identity cache only where every lookup is a miss.
   */
  final class Floor implements Variant {
    @Override
    public Wrapper at(long handle, int index) {
      return JniWeakFloor.at(handle, index);
    }

    @Override
    public long entries() {
      return JniWeakFloor.liveWeakRefs();  // one weak reference per wrapper not cleaned up
    }

    @Override
    public long heldReferences() {
      // The cleanup deletes the weak reference at once. Polled: two relaxed counters, no lock.
      return JniWeakFloor.liveWeakRefs();
    }
  }
}

// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The wrappers of native objects, one per native object for as long as it lives: palrt's
 * identity cache (palrt::jni::identity_cache) holds each through a JNI weak global reference,
 * and the wrapper's {@link WrapperCleanup} removes its entry once the collector found it
 * unreachable.
 */
public final class WrapperCache {
  static {
    Binding.load();
  }

  private WrapperCache() {}

  /**
   * The wrapper of object {@code i} of a {@link NativeObjects} array: the live one if there is
   * one, else a new one, cached. A hit is one JNI transition and takes no lock.
   *
   * @throws IllegalStateException after {@link #close()}
   * @throws IndexOutOfBoundsException unless {@code 0 <= i < n}
   * @throws NullPointerException for handle 0
   */
  public static Wrapper at(long handle, int i) {
    Wrapper found = find(handle, i);
    return found != null ? found : made(handle, i);
  }

  // The miss, in Java: allocating the wrapper and its cleanup here costs a fraction of
  // allocating them from native code (a JNI upcall each), and the two natives it adds are
  // downcalls, which are cheap. Everything the wrapper needs is made before publish() caches
  // it, so nothing can fail once it is cached: track() allocates nothing.
  private static Wrapper made(long handle, int i) {
    final long pointer = NativeObjects.pointerAt(handle, i);
    final Wrapper wrapper = new Wrapper(pointer);
    final WrapperCleanup cleanup = new WrapperCleanup(wrapper, pointer);
    final Wrapper cached = publish(pointer, wrapper, cleanup);
    if (cached == wrapper) {
      // Cached, and publish() stored the token's weak reference in the cleanup: keep it. (If
      // track() failed, a StackOverflowError, the wrapper would stay cached without a cleanup:
      // identity holds, its entry is replaced once it dies, and its weak reference lives until
      // the JVM ends: one leaked reference, on a path that already failed. Forgetting it here
      // instead could let a second wrapper be made while another thread holds this one.)
      cleanup.track();
    }
    // Else another thread's wrapper was cached first: ours and its untracked cleanup are
    // garbage together (WrapperCleanup.java, the protocol).
    return cached;
  }

  /**
   * The live wrapper of object {@code i}, or null: none lives (a dying one is not handed out).
   * Validates as {@link #at} does, and throws IllegalStateException after close() rather than
   * let at() make a wrapper it could not cache.
   */
  private static native Wrapper find(long handle, int i);

  /**
   * Caches {@code wrapper}, made by at() after find() missed, unless a live wrapper of
   * {@code pointer} was cached meanwhile: returns the one cached. When it is {@code wrapper},
   * the token's weak reference is in {@code cleanup}, to track.
   */
  private static native Wrapper publish(long pointer, Wrapper wrapper, WrapperCleanup cleanup);

  /** The live wrapper of the native object at {@code pointer}, or null (none lives, or closed). */
  public static native Wrapper of(long pointer);

  /** The cache's entries: one per wrapper whose cleanup has not run yet. */
  public static native long entries();

  /**
   * The weak global references the cache made and has not deleted: one per entry, plus those
   * of dying wrappers replaced or forgotten whose deletion waits for a grace period.
   */
  public static native long liveWeakRefs();

  /**
   * The end of the cache (before the JVM is destroyed, or the library unloaded): {@code at}
   * throws IllegalStateException from now on and {@code of} returns null; the cleanups of
   * wrappers still alive delete their weak references at once when they run, and those of
   * wrappers that never die are the JVM's, which frees them when it ends.
   */
  public static native void close();
}

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
   * one, else a new one, cached. One JNI transition; a hit takes no lock.
   *
   * @throws IllegalStateException after {@link #close()}
   * @throws IndexOutOfBoundsException unless {@code 0 <= i < n}
   * @throws NullPointerException for handle 0
   */
  public static native Wrapper at(long handle, int i);

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

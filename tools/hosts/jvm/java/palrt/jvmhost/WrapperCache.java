// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The wrappers of native objects, one per native object for as long as it lives: palrt's
 * identity cache (palrt::jni::identity_cache) holds each through a JNI weak global reference,
 * and {@link WrapperSweeper} removes the entries of collected wrappers after each collection.
 */
public final class WrapperCache {
  static {
    Binding.load();
    WrapperSweeper.start();
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

  // The miss, in Java: allocating the wrapper here costs a fraction of allocating it from
  // native code (a JNI upcall), and the two natives it adds are downcalls, which are cheap.
  private static Wrapper made(long handle, int i) {
    final long pointer = NativeObjects.pointerAt(handle, i);
    // Ours, or the live wrapper another thread cached first (ours is then garbage).
    return publish(pointer, new Wrapper(pointer));
  }

  /**
   * The live wrapper of object {@code i}, or null: none lives (a dying one is not handed out).
   * Validates as {@link #at} does, and throws IllegalStateException after close() rather than
   * let at() make a wrapper it could not cache.
   */
  private static native Wrapper find(long handle, int i);

  /**
   * Caches {@code wrapper}, made by at() after find() missed, unless a live wrapper of
   * {@code pointer} was cached meanwhile: returns the one cached.
   */
  private static native Wrapper publish(long pointer, Wrapper wrapper);

  /** The live wrapper of the native object at {@code pointer}, or null (none lives, or closed). */
  public static native Wrapper of(long pointer);

  /** The cache's entries: one per wrapper not swept yet (alive, or collected since the last sweep). */
  public static native long entries();

  /**
   * The weak global references the cache made and has not deleted: one per entry, plus those
   * of dying wrappers replaced since the last sweep, which deletes them.
   */
  public static native long liveWeakRefs();

  /**
   * The end of the cache (before the JVM is destroyed, or the library unloaded): a last sweep,
   * then {@code at} throws IllegalStateException and {@code of} returns null, and sweeps do
   * nothing; the weak references still cached are the JVM's, which frees them when it ends.
   */
  public static native void close();
}

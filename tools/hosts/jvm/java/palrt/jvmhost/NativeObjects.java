// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Arrays of native objects: what the wrappers wrap. {@code create(n)} allocates n C++ objects
 * ({@code struct native_object { std::uint64_t id; }}, id = the index), each on its own, so
 * that they have the unrelated addresses of a real library's objects, and returns a handle to
 * the array.
 *
 * <p>Destroy an array only once no wrapper of its objects is reachable any more: a wrapper
 * outliving its object would be handed out again for a new object allocated at the same
 * address (the identity cache keys on addresses). Handles are not checked beyond null: a
 * handle that {@code create} did not return, or one destroyed already, is undefined
 * behaviour, as a dangling pointer is in C.
 */
public final class NativeObjects {
  static {
    Binding.load();
  }

  private NativeObjects() {}

  /**
   * A new array of {@code n} native objects.
   *
   * @throws IllegalArgumentException if {@code n} is negative
   * @throws OutOfMemoryError if the native heap is exhausted
   */
  public static native long create(int n);

  /** Frees the array and its objects. {@code destroy(0)} does nothing. */
  public static native void destroy(long handle);

  /**
   * The address of object {@code i}: the native pointer its wrapper is cached under.
   *
   * @throws IndexOutOfBoundsException unless {@code 0 <= i < n}
   * @throws NullPointerException for handle 0
   */
  public static native long pointerAt(long handle, int i);
}

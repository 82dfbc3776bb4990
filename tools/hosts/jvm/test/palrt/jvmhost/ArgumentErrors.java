// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Bad arguments are Java exceptions, never a crash or a C++ exception through a JNI frame:
 * a negative count, an index out of range, handle 0; and what is not an error: of() of an
 * address nothing wraps, or of 0, is null, destroy(0) does nothing. None of them makes a
 * wrapper or leaves an entry.
 */
final class ArgumentErrors {
  private ArgumentErrors() {}

  static void run() {
    Check.noWrappersLeft("errors: at the start");
    final long created0 = HostProbe.weakRefsCreated();
    final long handle = NativeObjects.create(3);
    Check.throwsA(IllegalArgumentException.class, () -> NativeObjects.create(-1), "errors: create(-1)");
    for (int bad : new int[] {-1, 3, Integer.MIN_VALUE, Integer.MAX_VALUE}) {
      Check.throwsA(IndexOutOfBoundsException.class, () -> WrapperCache.at(handle, bad), "errors: at(h, " + bad + ")");
      Check.throwsA(IndexOutOfBoundsException.class, () -> NativeObjects.pointerAt(handle, bad),
          "errors: pointerAt(h, " + bad + ")");
    }
    Check.throwsA(NullPointerException.class, () -> WrapperCache.at(0, 0), "errors: at(0, 0)");
    Check.throwsA(NullPointerException.class, () -> NativeObjects.pointerAt(0, 0), "errors: pointerAt(0, 0)");
    Check.same(null, WrapperCache.of(0), "errors: of(0)");
    Check.same(null, WrapperCache.of(NativeObjects.pointerAt(handle, 1)), "errors: of() of a native never wrapped");
    NativeObjects.destroy(0);
    Check.equal(0, HostProbe.weakRefsCreated() - created0, "errors: wrappers made by failed calls");
    Check.noWrappersLeft("errors: after the failed calls");
    NativeObjects.destroy(handle);
    System.out.println("errors: bad counts, indices and handles raised Java exceptions; nothing was cached");
  }
}

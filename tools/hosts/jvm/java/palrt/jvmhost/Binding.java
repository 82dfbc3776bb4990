// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Loads libpalrt_jvmhost.so, once, for every class of the package that has native methods.
 *
 * <p>The library's JNI_OnLoad registers the natives of NativeObjects, WrapperCache,
 * WrapperSweeper and HostProbe (RegisterNatives: no exported Java_* names) and makes the
 * identity cache. Each of those classes calls {@link #load()} from its static initialiser, so
 * whichever is used first loads the library, and class initialisation (JLS 12.4.2) orders the
 * load before any of their native calls on every thread.
 */
final class Binding {
  static {
    System.loadLibrary("palrt_jvmhost");
  }

  private Binding() {}

  /** Does nothing: calling it initialises this class, which loads the library once. */
  static void load() {}
}

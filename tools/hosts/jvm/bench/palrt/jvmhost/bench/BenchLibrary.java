// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

/**
 * Loads libpalrt_jvmbench.so (the mutex-map baseline's and the churn floor's natives, and the
 * malloc probe) once. Its JNI_OnLoad registers the natives of {@link MutexMapWrapperCache},
 * {@link JniWeakFloor} and {@link NativeHeap} with RegisterNatives, so a signature that drifts
 * from the C++ side fails at load, naming the method, instead of at the first call.
 */
final class BenchLibrary {
  static {
    System.loadLibrary("palrt_jvmbench");
  }

  private BenchLibrary() {}

  /** Runs the static initialiser above; the classes with natives call it from theirs. */
  static void load() {}
}

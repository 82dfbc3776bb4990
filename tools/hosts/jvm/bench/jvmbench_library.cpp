// SPDX-License-Identifier: MIT
// libpalrt_jvmbench.so's entry point: loaded by palrt.jvmhost.bench.BenchLibrary
// (System.loadLibrary), it registers every native of the benchmark's classes.
#include <jni.h>

#include "jvmbench_natives.hpp"

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  // A failure leaves the Java exception (NoSuchMethodError, NoClassDefFoundError) pending:
  // System.loadLibrary throws it, naming what did not match.
  if (!jvmbench::register_native_heap_natives(env) || !jvmbench::register_mutex_map_natives(env) ||
      !jvmbench::register_jni_weak_floor_natives(env))
    return JNI_ERR;
  return JNI_VERSION_1_8;
}

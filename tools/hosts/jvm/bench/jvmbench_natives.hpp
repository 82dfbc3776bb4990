// SPDX-License-Identifier: MIT
// libpalrt_jvmbench.so, the JVM host benchmark's own JNI library: each file registers the
// natives of its Java class (RegisterNatives, from JNI_OnLoad in jvmbench_library.cpp), so
// a signature that drifts from the Java side fails when the library loads, naming the method.
#pragma once

#include <jni.h>

namespace jvmbench {

// palrt.jvmhost.bench.MutexMapWrapperCache (mutex_map_cache.cpp). False: a Java exception
// is pending.
bool register_mutex_map_natives(JNIEnv* env) noexcept;
// palrt.jvmhost.bench.JniWeakFloor (jni_weak_floor.cpp).
bool register_jni_weak_floor_natives(JNIEnv* env) noexcept;
// palrt.jvmhost.bench.NativeHeap (native_heap.cpp).
bool register_native_heap_natives(JNIEnv* env) noexcept;

}  // namespace jvmbench

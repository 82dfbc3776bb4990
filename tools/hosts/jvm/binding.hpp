// SPDX-License-Identifier: MIT
// libpalrt_jvmhost.so: the binding of the JVM host. Its parts register their Java classes'
// native methods (RegisterNatives, from JNI_OnLoad in binding.cpp; the library exports
// nothing else, libpalrt_jvmhost.map), one file each:
//   native_objects.cpp  palrt.jvmhost.NativeObjects: the native objects wrappers stand for
//   wrapper_cache.cpp   palrt.jvmhost.WrapperCache and WrapperSweeper: palrt's identity cache
//   host_probe.cpp      palrt.jvmhost.HostProbe: the suite's hooks (hold_gate.hpp, counters)
// Each returns false with a Java exception pending when it cannot (a class or member missing
// from the jar: a jar and a library from different builds), and JNI_OnLoad then fails, which
// System.loadLibrary reports with that exception.
#pragma once

#include <jni.h>

namespace palrt_jvmhost {

bool register_native_objects(JNIEnv* env);
bool register_wrapper_cache(JNIEnv* env);
bool register_host_probe(JNIEnv* env);
// JNI_OnUnload: closes the cache.
void unregister_wrapper_cache(JNIEnv* env) noexcept;

// One entry of a RegisterNatives table (jni.h's fields are char*, which JNI never writes).
template <class Function>
JNINativeMethod native_method(const char* name, const char* signature, Function* function) noexcept {
  return {const_cast<char*>(name), const_cast<char*>(signature), reinterpret_cast<void*>(function)};
}

// RegisterNatives for the class `class_name` (a JNI class name); false with an exception
// pending if the class or one of the methods is missing.
bool register_natives(JNIEnv* env, const char* class_name, const JNINativeMethod* methods, jint count) noexcept;

}  // namespace palrt_jvmhost

// SPDX-License-Identifier: MIT
// How the binding's natives fail: they raise a Java exception and return, never throw C++
// exceptions through a JNI frame (the JVM cannot unwind them).
#pragma once

#include <jni.h>

namespace palrt_jvmhost {

// Raises `class_name` (a JNI class name, "java/lang/IllegalArgumentException") with `message`,
// unless an exception is pending already (the first one is the one to report; if FindClass
// itself fails, its NoClassDefFoundError is pending instead).
inline void throw_java(JNIEnv* env, const char* class_name, const char* message) noexcept {
  if (env->ExceptionCheck()) return;
  if (jclass c = env->FindClass(class_name)) {
    env->ThrowNew(c, message);
    env->DeleteLocalRef(c);
  }
}

}  // namespace palrt_jvmhost

// SPDX-License-Identifier: MIT
// libpalrt_jvmhost.so's entry points (binding.hpp): JNI_OnLoad registers every native of the
// package palrt.jvmhost with RegisterNatives and makes the identity cache; JNI_OnUnload
// (which HotSpot calls only when the class loader that loaded the library is collected)
// closes it.
#include "binding.hpp"

#include "wrapper_cache.hpp"

namespace palrt_jvmhost {

bool register_natives(JNIEnv* env, const char* class_name, const JNINativeMethod* methods, jint count) noexcept {
  jclass c = env->FindClass(class_name);  // through the loader of Binding, which loads this library
  if (!c) return false;
  const bool registered = env->RegisterNatives(c, methods, count) == JNI_OK;  // else NoSuchMethodError
  env->DeleteLocalRef(c);
  return registered;
}

}  // namespace palrt_jvmhost

namespace {

// JNI 1.8 is all the binding uses (and what palrt/jni/identity_cache.hpp asks GetEnv for).
constexpr jint jni_version = JNI_VERSION_1_8;

JNIEnv* env_of(JavaVM* vm) noexcept {
  JNIEnv* env = nullptr;
  return vm->GetEnv(reinterpret_cast<void**>(&env), jni_version) == JNI_OK ? env : nullptr;
}

}  // namespace

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = env_of(vm);
  if (!env) return JNI_ERR;
  if (!palrt_jvmhost::register_wrapper_cache(env) || !palrt_jvmhost::register_native_objects(env) ||
      !palrt_jvmhost::register_host_probe(env))
    return JNI_ERR;  // the exception pending says what was missing
  return jni_version;
}

extern "C" JNIEXPORT void JNICALL JNI_OnUnload(JavaVM* vm, void*) {
  if (JNIEnv* env = env_of(vm)) palrt_jvmhost::unregister_wrapper_cache(env);
}

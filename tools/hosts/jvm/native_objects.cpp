// SPDX-License-Identifier: MIT
// palrt.jvmhost.NativeObjects' natives (native_objects.hpp).
#include "native_objects.hpp"

#include <iterator>
#include <new>
#include <string>

#include "binding.hpp"
#include "java_exceptions.hpp"

namespace palrt_jvmhost {

native_objects::native_objects(std::size_t n) {
  objects_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) objects_.push_back(std::make_unique<native_object>(native_object{i}));
}

native_object* object_at(JNIEnv* env, jlong handle, jint i) noexcept {
  auto* objects = reinterpret_cast<const native_objects*>(handle);
  if (!objects) {
    throw_java(env, "java/lang/NullPointerException", "palrt.jvmhost: native objects handle 0");
    return nullptr;
  }
  if (i < 0 || static_cast<std::size_t>(i) >= objects->size()) {
    // to_string may throw std::bad_alloc: report the index only when it can be formatted.
    try {
      const std::string message = "palrt.jvmhost: index " + std::to_string(i) + " out of bounds for " +
                                  std::to_string(objects->size()) + " native objects";
      throw_java(env, "java/lang/IndexOutOfBoundsException", message.c_str());
    } catch (const std::bad_alloc&) {
      throw_java(env, "java/lang/IndexOutOfBoundsException", "palrt.jvmhost: native object index out of bounds");
    }
    return nullptr;
  }
  return objects->at(static_cast<std::size_t>(i));
}

namespace {

jlong JNICALL create(JNIEnv* env, jclass, jint n) {
  if (n < 0) {
    throw_java(env, "java/lang/IllegalArgumentException", "palrt.jvmhost.NativeObjects.create: negative count");
    return 0;
  }
  try {
    // Owned by the Java code from here: destroy() takes it back.
    return reinterpret_cast<jlong>(std::make_unique<native_objects>(static_cast<std::size_t>(n)).release());
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "palrt.jvmhost.NativeObjects.create: native heap exhausted");
    return 0;
  }
}

void JNICALL destroy(JNIEnv*, jclass, jlong handle) {
  std::unique_ptr<native_objects> owned(reinterpret_cast<native_objects*>(handle));
}

jlong JNICALL pointer_at(JNIEnv* env, jclass, jlong handle, jint i) {
  return reinterpret_cast<jlong>(object_at(env, handle, i));  // 0 with an exception pending
}

}  // namespace

bool register_native_objects(JNIEnv* env) {
  static const JNINativeMethod methods[] = {
      native_method("create", "(I)J", &create),
      native_method("destroy", "(J)V", &destroy),
      native_method("pointerAt", "(JI)J", &pointer_at),
  };
  return register_natives(env, "palrt/jvmhost/NativeObjects", methods, std::size(methods));
}

}  // namespace palrt_jvmhost

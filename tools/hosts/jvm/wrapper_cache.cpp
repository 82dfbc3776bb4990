// SPDX-License-Identifier: MIT
// palrt.jvmhost.WrapperCache's and WrapperSweeper's natives: a native object's wrapper through
// palrt::jni::identity_cache, and the sweep that removes the collected ones.
#include "wrapper_cache.hpp"

#include <algorithm>
#include <exception>
#include <iterator>
#include <memory>
#include <new>

#include "binding.hpp"
#include "hold_gate.hpp"
#include "java_exceptions.hpp"
#include "native_objects.hpp"

namespace palrt_jvmhost {

namespace {

// Written by JNI_OnLoad before any native of the package can run and then only read
// (JNI_OnUnload runs when none can run any more), so a plain global: class initialisation
// orders the load before every call (Binding.java).
palrt::jni::identity_cache* cache = nullptr;  // never destroyed: wrapper_cache.hpp

// WrapperCache.find(handle, i): the hit of WrapperCache.at(), one JNI transition, the cache's
// lookup and one NewLocalRef. Null on a miss, and Java makes the wrapper (WrapperCache.java);
// after close(), IllegalStateException instead, so that Java makes none it cannot cache.
jobject JNICALL find(JNIEnv* env, jclass, jlong handle, jint i) {
  const native_object* native = object_at(env, handle, i);
  if (!native) return nullptr;  // NullPointerException or IndexOutOfBoundsException pending
  jobject found = cache->find(env, native);
  if (!found && cache->closed())
    throw_java(env, "java/lang/IllegalStateException", "palrt.jvmhost: the wrapper cache is closed");
  return found;
}

// WrapperCache.publish(pointer, wrapper): caches the wrapper Java made after find() missed,
// and returns the wrapper of the native: that one if it was cached, else the live one another
// thread cached meanwhile (then Java drops its own).
jobject JNICALL publish(JNIEnv* env, jclass, jlong pointer, jobject wrapper) {
  const void* native = reinterpret_cast<const void*>(pointer);
  make_gate().pass(native);                            // made, not cached: the window of a creation race
  return cache->insert(env, native, wrapper).wrapper;  // null: a Java exception is pending
}

jobject JNICALL of(JNIEnv* env, jclass, jlong pointer) {
  return cache->find(env, reinterpret_cast<const void*>(pointer));
}

jlong JNICALL entries(JNIEnv* env, jclass) {
  try {
    return static_cast<jlong>(cache->counters().entries);
  } catch (const std::exception& e) {  // nothing a JVM process meets (a fork()ed child's error)
    throw_java(env, "java/lang/IllegalStateException", e.what());
    return 0;
  }
}

jlong JNICALL live_weak_refs(JNIEnv*, jclass) {
  // Deletions first: each follows its creation, so the creations read after them count at
  // least every reference whose deletion was counted, and the difference is not negative
  // (the counters are relaxed: that holds where loads are not reordered with loads, x86;
  // elsewhere the pair is a snapshot). Exact while no reference is being made or deleted,
  // which is when the suite reads it.
  const std::uint64_t deleted = cache->weak_refs_deleted();
  const std::uint64_t created = cache->weak_refs_created();
  return static_cast<jlong>(created - deleted);
}

void JNICALL close(JNIEnv* env, jclass) { cache->close(env); }

// WrapperSweeper.sweep(), on the sweeper thread after each collection (and the suite's own
// calls): the entries of collected wrappers removed, their weak references deleted.
jlong JNICALL sweep(JNIEnv* env, jclass) {
  sweep_gate().pass(sweep_gate_token());  // the window between a collection and its sweep
  return static_cast<jlong>(cache->sweep(env));
}

}  // namespace

palrt::jni::identity_cache& wrapper_cache() noexcept { return *cache; }

bool register_wrapper_cache(JNIEnv* env) {
  // The cache first: a native registered below may be called as soon as JNI_OnLoad returns.
  try {
    // Never destroyed (wrapper_cache.hpp): released into the plain global on purpose.
    cache = std::make_unique<palrt::jni::identity_cache>().release();
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "palrt.jvmhost: no memory for the identity cache");
    return false;
  } catch (const std::exception& e) {  // palrt could not start (its message says why)
    throw_java(env, "java/lang/UnsatisfiedLinkError", e.what());
    return false;
  }
  static const JNINativeMethod cache_methods[] = {
      native_method("find", "(JI)Lpalrt/jvmhost/Wrapper;", &find),
      native_method("publish", "(JLpalrt/jvmhost/Wrapper;)Lpalrt/jvmhost/Wrapper;", &publish),
      native_method("of", "(J)Lpalrt/jvmhost/Wrapper;", &of),
      native_method("entries", "()J", &entries),
      native_method("liveWeakRefs", "()J", &live_weak_refs),
      native_method("close", "()V", &close),
  };
  static const JNINativeMethod sweeper_methods[] = {
      native_method("sweep", "()J", &sweep),
  };
  if (!register_natives(env, "palrt/jvmhost/WrapperCache", cache_methods, std::size(cache_methods)) ||
      !register_natives(env, "palrt/jvmhost/WrapperSweeper", sweeper_methods, std::size(sweeper_methods)))
    return false;

  return true;
}

void unregister_wrapper_cache(JNIEnv* env) noexcept {
  if (cache) cache->close(env);
}

}  // namespace palrt_jvmhost

// SPDX-License-Identifier: MIT
// palrt.jvmhost.WrapperCache's and WrapperCleanup's natives: a native object's wrapper through
// palrt::jni::identity_cache, and the end of a wrapper (WrapperCleanup.java has the protocol).
#include "wrapper_cache.hpp"

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

// What the natives call in Java, and the cache. Written by JNI_OnLoad before any native of
// the package can run and then only read (JNI_OnUnload runs when none can run any more), so
// plain globals: class initialisation orders the load before every call (Binding.java).
struct java_members {
  jclass wrapper = nullptr;           // a global reference
  jmethodID wrapper_init = nullptr;   // Wrapper(long pointer)
  jclass cleanup = nullptr;           // a global reference
  jmethodID cleanup_init = nullptr;   // WrapperCleanup(Wrapper wrapper, long pointer)
  jmethodID cleanup_track = nullptr;  // void WrapperCleanup.track(long weak)
};
java_members java;
palrt::jni::identity_cache* cache = nullptr;  // never destroyed: wrapper_cache.hpp

// WrapperCache.at(handle, i): the one JNI transition of "Java asks for a native object's
// wrapper". A hit is the cache's lookup and one NewLocalRef; a miss also makes the wrapper and
// its cleanup here, and tracks the cleanup if this thread's wrapper is the one cached.
jobject JNICALL at(JNIEnv* env, jclass, jlong handle, jint i) {
  const native_object* native = object_at(env, handle, i);
  if (!native) return nullptr;
  jobject cleanup = nullptr;  // make()'s, untracked: garbage with its wrapper unless tracked
  palrt::jni::identity_cache::entry e = cache->get(env, native, [&cleanup](JNIEnv* jni, const void* n) -> jobject {
    const jlong pointer = reinterpret_cast<jlong>(n);
    jobject wrapper = jni->NewObject(java.wrapper, java.wrapper_init, pointer);
    if (!wrapper) return nullptr;  // OutOfMemoryError pending
    cleanup = jni->NewObject(java.cleanup, java.cleanup_init, wrapper, pointer);
    if (!cleanup) {
      jni->DeleteLocalRef(wrapper);
      return nullptr;
    }
    make_gate().pass(n);
    return wrapper;
  });
  if (e.created) {
    env->CallVoidMethod(cleanup, java.cleanup_track, reinterpret_cast<jlong>(e.weak));
    if (env->ExceptionCheck()) {
      // track() allocates nothing: only a StackOverflowError (or an asynchronous exception)
      // gets here. The wrapper stays cached without a cleanup: forgetting it now could let a
      // second wrapper be made while another thread holds this one from a hit. So identity
      // holds, its entry is replaced once it dies, and its weak reference lives until the JVM
      // ends (one leaked reference, on a path that already failed).
      env->DeleteLocalRef(e.wrapper);
      e.wrapper = nullptr;
    }
  }
  if (cleanup) env->DeleteLocalRef(cleanup);
  return e.wrapper;
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

// WrapperCleanup.forget(pointer, weak), on the cleanup thread.
void JNICALL forget(JNIEnv* env, jclass, jlong pointer, jlong weak) {
  const void* native = reinterpret_cast<const void*>(pointer);
  forget_gate().pass(native);
  cache->forget(env, native, reinterpret_cast<jweak>(weak));
}

// WrapperCleanup.settle(), on the cleanup thread after a burst (WrapperCleanup.java says why).
void JNICALL settle(JNIEnv*, jclass) { cache->settle(); }

}  // namespace

palrt::jni::identity_cache& wrapper_cache() noexcept { return *cache; }

bool register_wrapper_cache(JNIEnv* env, JavaVM* vm) {
  // The cache first: a native registered below may be called as soon as JNI_OnLoad returns.
  try {
    // Never destroyed (wrapper_cache.hpp): released into the plain global on purpose.
    cache = std::make_unique<palrt::jni::identity_cache>(vm).release();
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "palrt.jvmhost: no memory for the identity cache");
    return false;
  } catch (const std::exception& e) {  // palrt could not start (its message says why)
    throw_java(env, "java/lang/UnsatisfiedLinkError", e.what());
    return false;
  }
  const auto global_class = [env](const char* name) -> jclass {
    jclass local = env->FindClass(name);
    if (!local) return nullptr;
    auto global = static_cast<jclass>(env->NewGlobalRef(local));
    env->DeleteLocalRef(local);
    return global;  // null: OutOfMemoryError pending
  };
  // GetMethodID does not initialise the class (GetStaticMethodID would): WrapperCleanup's
  // initialiser, which starts the cleanup thread, runs at the first wrapper made.
  if (!(java.wrapper = global_class("palrt/jvmhost/Wrapper")) ||
      !(java.wrapper_init = env->GetMethodID(java.wrapper, "<init>", "(J)V")) ||
      !(java.cleanup = global_class("palrt/jvmhost/WrapperCleanup")) ||
      !(java.cleanup_init = env->GetMethodID(java.cleanup, "<init>", "(Lpalrt/jvmhost/Wrapper;J)V")) ||
      !(java.cleanup_track = env->GetMethodID(java.cleanup, "track", "(J)V")))
    return false;

  static const JNINativeMethod cache_methods[] = {
      native_method("at", "(JI)Lpalrt/jvmhost/Wrapper;", &at),
      native_method("of", "(J)Lpalrt/jvmhost/Wrapper;", &of),
      native_method("entries", "()J", &entries),
      native_method("liveWeakRefs", "()J", &live_weak_refs),
      native_method("close", "()V", &close),
  };
  static const JNINativeMethod cleanup_methods[] = {
      native_method("forget", "(JJ)V", &forget),
      native_method("settle", "()V", &settle),
  };
  if (!register_natives(env, "palrt/jvmhost/WrapperCache", cache_methods, std::size(cache_methods)) ||
      !register_natives(env, "palrt/jvmhost/WrapperCleanup", cleanup_methods, std::size(cleanup_methods)))
    return false;

  return true;
}

void unregister_wrapper_cache(JNIEnv* env) noexcept {
  if (cache) cache->close(env);
  for (jclass* c : {&java.wrapper, &java.cleanup}) {
    if (*c) env->DeleteGlobalRef(*c);
    *c = nullptr;
  }
}

}  // namespace palrt_jvmhost

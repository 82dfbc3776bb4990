// SPDX-License-Identifier: MIT
// palrt.jvmhost.WrapperCache's and WrapperCleanup's natives: a native object's wrapper through
// palrt::jni::identity_cache, and the end of a wrapper (WrapperCleanup.java has the protocol).
#include "wrapper_cache.hpp"

#include <algorithm>
#include <exception>
#include <iterator>
#include <memory>
#include <new>
#include <span>

#include "binding.hpp"
#include "hold_gate.hpp"
#include "java_exceptions.hpp"
#include "native_objects.hpp"

namespace palrt_jvmhost {

namespace {

// What the natives touch in Java, and the cache. Written by JNI_OnLoad before any native of
// the package can run and then only read (JNI_OnUnload runs when none can run any more), so
// plain globals: class initialisation orders the load before every call (Binding.java).
struct java_members {
  jclass cleanup = nullptr;        // a global reference: keeps cleanup_weak's class loaded
  jfieldID cleanup_weak = nullptr;  // long WrapperCleanup.weak: the token's weak reference
};
java_members java;
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

// WrapperCache.publish(pointer, wrapper, cleanup): caches the wrapper Java made after find()
// missed, with its cleanup made (untracked), and returns the wrapper of the native: that one
// if it was cached, with its token's weak reference stored in the cleanup for Java to track
// it, else the live one another thread cached meanwhile (then Java drops both of its own).
jobject JNICALL publish(JNIEnv* env, jclass, jlong pointer, jobject wrapper, jobject cleanup) {
  const void* native = reinterpret_cast<const void*>(pointer);
  make_gate().pass(native);  // made, not cached: the window of a creation race
  palrt::jni::identity_cache::entry e = cache->insert(env, native, wrapper);
  // A field write, which cannot fail (the field ID is the class's, the cleanup one of its
  // instances): once the wrapper is cached, nothing is left that could.
  if (e.created) env->SetLongField(cleanup, java.cleanup_weak, reinterpret_cast<jlong>(e.weak));
  return e.wrapper;  // null: a Java exception is pending
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

// WrapperCleanup.forget(tokens, count), on the cleanup thread: forget(pointer, weak) of the
// tokens (tokens[2k], tokens[2k + 1]) of `count` cleanups, in one JNI transition for a batch,
// and one identity_cache::forget() call, which retires their weak references together.
void JNICALL forget(JNIEnv* env, jclass, jlongArray tokens, jint count) {
  // Copied out rather than read in place (GetPrimitiveArrayCritical): forget() may run due
  // reclaims, each a DeleteWeakGlobalRef, which JNI forbids inside a critical region. A
  // chunk at a time: WrapperCleanup's batches fit in one.
  constexpr jint chunk = 64;
  jlong copy[2 * chunk];
  palrt::jni::identity_cache::token batch[chunk];
  for (jint done = 0; done < count;) {
    const jint n = std::min(count - done, chunk);
    env->GetLongArrayRegion(tokens, 2 * done, 2 * n, copy);
    if (env->ExceptionCheck()) return;  // ArrayIndexOutOfBoundsException: a count past the array
    for (jint k = 0; k < n; ++k) {
      batch[k] = {reinterpret_cast<const void*>(copy[2 * k]), reinterpret_cast<jweak>(copy[2 * k + 1])};
      forget_gate().pass(batch[k].native);
    }
    cache->forget(env, std::span<const palrt::jni::identity_cache::token>(batch, static_cast<std::size_t>(n)));
    done += n;
  }
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
  // GetFieldID does not initialise the class: WrapperCleanup's initialiser, which starts the
  // cleanup thread, runs at the first wrapper made.
  if (!(java.cleanup = global_class("palrt/jvmhost/WrapperCleanup")) ||
      !(java.cleanup_weak = env->GetFieldID(java.cleanup, "weak", "J")))
    return false;

  static const JNINativeMethod cache_methods[] = {
      native_method("find", "(JI)Lpalrt/jvmhost/Wrapper;", &find),
      native_method("publish", "(JLpalrt/jvmhost/Wrapper;Lpalrt/jvmhost/WrapperCleanup;)Lpalrt/jvmhost/Wrapper;",
                    &publish),
      native_method("of", "(J)Lpalrt/jvmhost/Wrapper;", &of),
      native_method("entries", "()J", &entries),
      native_method("liveWeakRefs", "()J", &live_weak_refs),
      native_method("close", "()V", &close),
  };
  static const JNINativeMethod cleanup_methods[] = {
      native_method("forget", "([JI)V", &forget),
      native_method("settle", "()V", &settle),
  };
  if (!register_natives(env, "palrt/jvmhost/WrapperCache", cache_methods, std::size(cache_methods)) ||
      !register_natives(env, "palrt/jvmhost/WrapperCleanup", cleanup_methods, std::size(cleanup_methods)))
    return false;

  return true;
}

void unregister_wrapper_cache(JNIEnv* env) noexcept {
  if (cache) cache->close(env);
  if (java.cleanup) env->DeleteGlobalRef(java.cleanup);
  java.cleanup = nullptr;
}

}  // namespace palrt_jvmhost

// SPDX-License-Identifier: MIT
// The mutex-map baseline of the JVM host's benchmark, the native half (the Java half:
// palrt/jvmhost/bench/MutexMapWrapperCache.java): the side table a C++ binding writes first
// for "one Java wrapper per native object", a std::unordered_map<const void*, jweak> under one
// std::mutex, written with the care such a binding needs and no more:
//
// - A hit turns the weak global reference into a local one (NewLocalRef) under the mutex.
//   It must: forget() deletes the weak reference once it erased the entry, so a weak
//   reference read from the map is valid only while the mutex is held. (palrt's cache reads
//   it in a read section instead, and deletes it after a grace period.)
// - A miss makes the wrapper with no lock held (its constructor is Java code, which may reach
//   a safepoint and wait out a collection), then inserts under the mutex: another thread's
//   live wrapper, cached meanwhile, wins and is returned; an entry whose wrapper the collector
//   cleared (its cleanup has not run yet) is replaced. Then, with no lock held, the wrapper's
//   cleanup is registered (MutexMapWrapperCache.track: a PhantomReference carrying the pointer
//   and the weak reference: JniWeakFloor.java measures that mechanism alone).
// - forget(pointer, weak), from that cleanup: erases the entry if it still maps the pointer to
//   that weak reference (a newer wrapper's entry stays), and deletes the weak reference.
//
// Every call to at() takes the one mutex, hits included: that is the cost palrt's lock-free
// hit is measured against, at one thread and at two.
#include <jni.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <iterator>
#include <mutex>
#include <new>
#include <unordered_map>

#include "java_exceptions.hpp"  // the JVM host's: palrt_jvmhost::throw_java
#include "jvmbench_natives.hpp"
#include "native_objects.hpp"  // the JVM host's: the objects NativeObjects' handles name

namespace jvmbench {
namespace {

using palrt_jvmhost::throw_java;

struct side_table {
  std::mutex mutex;
  std::unordered_map<const void*, jweak> wrappers;  // guarded by mutex
  // wrappers.size() as of its last change, for the benchmark's wait for the cleanups (the
  // churn case polls it about once a microsecond): read without the mutex, so that the
  // waiting thread does not contend with the forget() calls it waits for. Written under the
  // mutex on a miss and in forget(), never on a hit. Relaxed: the waiter only needs to see
  // the count reach zero eventually, and polls again until it does.
  std::atomic<std::size_t> size_seen{0};

  void note_size() noexcept { size_seen.store(wrappers.size(), std::memory_order_relaxed); }
};

// Made by register_mutex_map_natives(), before RegisterNatives makes any native callable, and
// never destroyed: the cleanup thread is a daemon, which may be inside forget() while the
// process exits and runs static destructors.
side_table* table = nullptr;
jclass wrapper_class = nullptr;    // palrt.jvmhost.Wrapper, a global reference
jmethodID wrapper_init = nullptr;  // Wrapper(long pointer)
jclass cache_class = nullptr;      // palrt.jvmhost.bench.MutexMapWrapperCache, global
jmethodID track_method = nullptr;  // static void track(Wrapper, long weak)

// Object `i` of the NativeObjects array `handle`, checked as NativeObjects.pointerAt checks it
// (the same work in every variant's call); null with a Java exception pending.
const void* object_at(JNIEnv* env, jlong handle, jint i) noexcept {
  const auto* objects = reinterpret_cast<const palrt_jvmhost::native_objects*>(handle);
  if (!objects) {
    throw_java(env, "java/lang/NullPointerException", "MutexMapWrapperCache.at: native objects handle 0");
    return nullptr;
  }
  if (i < 0 || static_cast<std::size_t>(i) >= objects->size()) {
    throw_java(env, "java/lang/IndexOutOfBoundsException", "MutexMapWrapperCache.at: index out of bounds");
    return nullptr;
  }
  return objects->at(static_cast<std::size_t>(i));
}

// Removes the entry of `native` if it still holds `weak`.
void erase_if_mapped(const void* native, jweak weak) {
  std::lock_guard<std::mutex> lock(table->mutex);
  auto it = table->wrappers.find(native);
  if (it != table->wrappers.end() && it->second == weak) {
    table->wrappers.erase(it);
    table->note_size();
  }
}

// The miss: a new wrapper, cached, its cleanup registered; or the winner of a race.
jobject make(JNIEnv* env, const void* native) {
  jobject made = env->NewObject(wrapper_class, wrapper_init, reinterpret_cast<jlong>(native));
  if (!made) return nullptr;  // the constructor's exception is pending
  jweak weak = env->NewWeakGlobalRef(made);
  if (!weak) {  // OutOfMemoryError pending
    env->DeleteLocalRef(made);
    return nullptr;
  }
  jobject winner = nullptr;
  try {
    std::lock_guard<std::mutex> lock(table->mutex);
    auto [it, inserted] = table->wrappers.try_emplace(native, weak);
    if (!inserted) {
      winner = env->NewLocalRef(it->second);
      // Null: the cached wrapper is dying (cleared, its cleanup pending). Ours replaces it;
      // its forget() will find another weak reference in the entry and only delete its own.
      if (!winner) it->second = weak;
    }
    table->note_size();
  } catch (...) {  // std::bad_alloc from the node: ours was never published
    env->DeleteWeakGlobalRef(weak);
    env->DeleteLocalRef(made);
    throw;
  }
  if (winner) {  // another thread cached a live wrapper first: ours was never published
    env->DeleteWeakGlobalRef(weak);
    env->DeleteLocalRef(made);
    return winner;
  }
  env->CallStaticVoidMethod(cache_class, track_method, made, reinterpret_cast<jlong>(weak));
  if (env->ExceptionCheck()) {
    // No cleanup will ever forget this entry (OutOfMemoryError making it): take it back. A
    // lookup that found it meanwhile holds a local reference of its own, not `weak`.
    erase_if_mapped(native, weak);
    env->DeleteWeakGlobalRef(weak);
    env->DeleteLocalRef(made);
    return nullptr;
  }
  return made;
}

jobject JNICALL at(JNIEnv* env, jclass, jlong handle, jint i) {
  const void* native = object_at(env, handle, i);
  if (!native) return nullptr;
  try {
    {
      std::lock_guard<std::mutex> lock(table->mutex);
      auto it = table->wrappers.find(native);
      if (it != table->wrappers.end())
        if (jobject live = env->NewLocalRef(it->second)) return live;
    }
    return make(env, native);
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "MutexMapWrapperCache.at: native heap exhausted");
  } catch (const std::exception& e) {  // std::system_error from the mutex
    throw_java(env, "java/lang/RuntimeException", e.what());
  }
  return nullptr;
}

jlong JNICALL entries(JNIEnv*, jclass) {
  std::lock_guard<std::mutex> lock(table->mutex);
  return static_cast<jlong>(table->wrappers.size());
}

jlong JNICALL entries_seen(JNIEnv*, jclass) {
  return static_cast<jlong>(table->size_seen.load(std::memory_order_relaxed));
}

void JNICALL forget(JNIEnv* env, jclass, jlong pointer, jlong weak_bits) {
  const auto weak = reinterpret_cast<jweak>(weak_bits);
  try {
    erase_if_mapped(reinterpret_cast<const void*>(pointer), weak);
  } catch (const std::exception& e) {  // std::system_error from the mutex: keep the entry
    throw_java(env, "java/lang/RuntimeException", e.what());
    return;
  }
  // At once: lookups turn a weak reference into a local one only under the mutex, and this
  // one is in no entry any more.
  env->DeleteWeakGlobalRef(weak);
}

// A global reference to the class `name`, or null with an exception pending.
jclass global_class(JNIEnv* env, const char* name) noexcept {
  jclass local = env->FindClass(name);
  if (!local) return nullptr;
  auto global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;  // null: OutOfMemoryError pending
}

}  // namespace

bool register_mutex_map_natives(JNIEnv* env) noexcept {
  wrapper_class = global_class(env, "palrt/jvmhost/Wrapper");
  if (!wrapper_class) return false;
  wrapper_init = env->GetMethodID(wrapper_class, "<init>", "(J)V");
  if (!wrapper_init) return false;
  cache_class = global_class(env, "palrt/jvmhost/bench/MutexMapWrapperCache");
  if (!cache_class) return false;
  track_method = env->GetStaticMethodID(cache_class, "track", "(Lpalrt/jvmhost/Wrapper;J)V");
  if (!track_method) return false;
  table = new (std::nothrow) side_table;
  if (!table) {
    throw_java(env, "java/lang/OutOfMemoryError", "libpalrt_jvmbench: the mutex map");
    return false;
  }
  const JNINativeMethod methods[] = {
      {const_cast<char*>("at"), const_cast<char*>("(JI)Lpalrt/jvmhost/Wrapper;"), reinterpret_cast<void*>(&at)},
      {const_cast<char*>("entries"), const_cast<char*>("()J"), reinterpret_cast<void*>(&entries)},
      {const_cast<char*>("entriesSeen"), const_cast<char*>("()J"), reinterpret_cast<void*>(&entries_seen)},
      {const_cast<char*>("forget"), const_cast<char*>("(JJ)V"), reinterpret_cast<void*>(&forget)},
  };
  return env->RegisterNatives(cache_class, methods, static_cast<jint>(std::size(methods))) == JNI_OK;
}

}  // namespace jvmbench

// SPDX-License-Identifier: MIT
// The jni-weak-floor variant of the churn case, the native half (the Java half, and what the
// variant is for: palrt/jvmhost/bench/JniWeakFloor.java): the least a binding that holds its
// wrappers through JNI weak global references and removes each with a cleanup does per
// wrapper, with no map behind it.
//
// - newWeak(wrapper): NewWeakGlobalRef of a wrapper Java made, returned as the cleanup's token.
// - forget(weaks, count): DeleteWeakGlobalRef of a batch of tokens, from the cleanup thread,
//   at once (nothing can be reading them: no lookup exists).
// - liveWeakRefs(): references made and not deleted yet, for the benchmark's wait.
//
// The two counters behind liveWeakRefs() are the only work here besides the two JNI calls; the
// palrt binding keeps the same pair (identity_cache's weak_refs_created/deleted), so the floor
// does not undercut it by leaving them out.
#include <jni.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "java_exceptions.hpp"  // the JVM host's: palrt_jvmhost::throw_java
#include "jvmbench_natives.hpp"

namespace jvmbench {
namespace {

using palrt_jvmhost::throw_java;

// Each counter on a cache line of its own: `created` is written by the thread making wrappers
// (once per wrapper), `deleted` by the cleanup thread (once per batch), so neither write takes
// the line the other thread writes. Relaxed: they order nothing, they are only counted.
struct alignas(64) counter {
  std::atomic<std::uint64_t> value{0};
};
counter created;
counter deleted;

// JniWeakFloor.newWeak(wrapper): one JNI transition, one weak global reference.
jlong JNICALL new_weak(JNIEnv* env, jclass, jobject wrapper) {
  const jweak weak = env->NewWeakGlobalRef(wrapper);
  if (!weak) {
    // The wrapper is never null (Java just made it), so the JVM could not store the reference.
    // HotSpot throws OutOfMemoryError itself; the JNI specification only says it may.
    throw_java(env, "java/lang/OutOfMemoryError", "JniWeakFloor.newWeak: no JNI weak global reference");
    return 0;
  }
  created.value.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<jlong>(weak);
}

// JniWeakFloor.forget(weaks, count), on the cleanup thread: deletes the first `count` tokens,
// one JNI transition for a batch.
void JNICALL forget(JNIEnv* env, jclass, jlongArray weaks, jint count) {
  // Copied out rather than read in place (GetPrimitiveArrayCritical): JNI forbids
  // DeleteWeakGlobalRef inside a critical region. A chunk at a time, as the binding's
  // forget() does; a JniWeakFloor batch fits in one.
  constexpr jint chunk = 64;
  jlong copy[chunk];
  for (jint done = 0; done < count;) {
    const jint n = std::min(count - done, chunk);
    env->GetLongArrayRegion(weaks, done, n, copy);
    if (env->ExceptionCheck()) return;  // ArrayIndexOutOfBoundsException: a count past the array
    for (jint k = 0; k < n; ++k) env->DeleteWeakGlobalRef(reinterpret_cast<jweak>(copy[k]));
    deleted.value.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    done += n;
  }
}

jlong JNICALL live_weak_refs(JNIEnv*, jclass) {
  // Deletions first: each follows its creation, so the creations read after them count at
  // least every reference whose deletion was counted, and the difference is not negative
  // (x86 does not reorder loads with loads; elsewhere the pair is a snapshot). Exact while no
  // reference is being made or deleted, which is when the churn case's wait ends.
  const std::uint64_t gone = deleted.value.load(std::memory_order_relaxed);
  const std::uint64_t made = created.value.load(std::memory_order_relaxed);
  return static_cast<jlong>(made - gone);
}

}  // namespace

bool register_jni_weak_floor_natives(JNIEnv* env) noexcept {
  // FindClass loads the class without initialising it: its cleanup thread starts only in the
  // JVM that runs this variant, at its first wrapper.
  jclass c = env->FindClass("palrt/jvmhost/bench/JniWeakFloor");
  if (!c) return false;
  const JNINativeMethod methods[] = {
      {const_cast<char*>("newWeak"), const_cast<char*>("(Lpalrt/jvmhost/Wrapper;)J"),
       reinterpret_cast<void*>(&new_weak)},
      {const_cast<char*>("forget"), const_cast<char*>("([JI)V"), reinterpret_cast<void*>(&forget)},
      {const_cast<char*>("liveWeakRefs"), const_cast<char*>("()J"), reinterpret_cast<void*>(&live_weak_refs)},
  };
  const bool ok = env->RegisterNatives(c, methods, static_cast<jint>(std::size(methods))) == JNI_OK;
  env->DeleteLocalRef(c);
  return ok;
}

}  // namespace jvmbench

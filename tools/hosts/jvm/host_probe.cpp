// SPDX-License-Identifier: MIT
// palrt.jvmhost.HostProbe's natives: the suite's hooks into the binding (HostProbe.java): the
// two gates (hold_gate.hpp) and the cache's counters.
#include <chrono>
#include <cstdint>
#include <exception>
#include <iterator>

#include "binding.hpp"
#include "hold_gate.hpp"
#include "java_exceptions.hpp"
#include "wrapper_cache.hpp"

namespace palrt_jvmhost {

namespace {

template <hold_gate& (*gate)() noexcept>
void JNICALL hold(JNIEnv*, jclass, jlong pointer) {
  gate().hold(reinterpret_cast<const void*>(pointer));
}

void JNICALL hold_sweep(JNIEnv*, jclass) { sweep_gate().hold(sweep_gate_token()); }

template <hold_gate& (*gate)() noexcept>
jboolean JNICALL await_held(JNIEnv*, jclass, jlong timeout_millis) {
  return gate().await_held(std::chrono::milliseconds(timeout_millis)) ? JNI_TRUE : JNI_FALSE;
}

template <hold_gate& (*gate)() noexcept>
void JNICALL release(JNIEnv*, jclass) {
  gate().release();
}

jlong JNICALL weak_refs_created(JNIEnv*, jclass) { return static_cast<jlong>(wrapper_cache().weak_refs_created()); }
jlong JNICALL weak_refs_deleted(JNIEnv*, jclass) { return static_cast<jlong>(wrapper_cache().weak_refs_deleted()); }

using palrt::interop::host_cache_counters;

// One of the cache's counters (snapshots taken under each bucket's lock).
template <std::uint64_t host_cache_counters::*field>
jlong JNICALL counter(JNIEnv* env, jclass) {
  try {
    return static_cast<jlong>(wrapper_cache().counters().*field);
  } catch (const std::exception& e) {  // nothing a JVM process meets (a fork()ed child's error)
    throw_java(env, "java/lang/IllegalStateException", e.what());
    return 0;
  }
}

}  // namespace

bool register_host_probe(JNIEnv* env) {
  static const JNINativeMethod methods[] = {
      native_method("holdSweep", "()V", &hold_sweep),
      native_method("awaitSweepHeld", "(J)Z", &await_held<sweep_gate>),
      native_method("releaseSweep", "()V", &release<sweep_gate>),
      native_method("holdMake", "(J)V", &hold<make_gate>),
      native_method("awaitMakeHeld", "(J)Z", &await_held<make_gate>),
      native_method("releaseMake", "()V", &release<make_gate>),
      native_method("weakRefsCreated", "()J", &weak_refs_created),
      native_method("weakRefsDeleted", "()J", &weak_refs_deleted),
      native_method("racesLost", "()J", &counter<&host_cache_counters::races_lost>),
      native_method("deadReplaced", "()J", &counter<&host_cache_counters::dead_replaced>),
  };
  return register_natives(env, "palrt/jvmhost/HostProbe", methods, std::size(methods));
}

}  // namespace palrt_jvmhost

// SPDX-License-Identifier: MIT
// palrt.jvmhost.bench.NativeHeap.inUseBytes(): the process's malloc'd bytes in use, for the
// bytes-per-wrapper case (BytesBench.java says what it counts and what it does not).
#include <malloc.h>

#include <iterator>

#include "jvmbench_natives.hpp"

namespace jvmbench {
namespace {

// mallinfo2 (glibc 2.33+; mallinfo's int fields wrap past 2 GiB): every arena, each under
// its own lock, so the figure is consistent per arena while other threads allocate.
// uordblks: bytes of allocated chunks, headers included (a free chunk cached in a thread's
// tcache counts as allocated: at most 7 per size class and thread, noise far below the
// megabytes measured); hblkhd: chunks served by mmap (large ones, as a big table's).
jlong JNICALL in_use_bytes(JNIEnv*, jclass) {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<jlong>(m.uordblks + m.hblkhd);
}

}  // namespace

bool register_native_heap_natives(JNIEnv* env) noexcept {
  jclass c = env->FindClass("palrt/jvmhost/bench/NativeHeap");
  if (!c) return false;
  const JNINativeMethod methods[] = {
      {const_cast<char*>("inUseBytes"), const_cast<char*>("()J"), reinterpret_cast<void*>(&in_use_bytes)},
  };
  const bool ok = env->RegisterNatives(c, methods, static_cast<jint>(std::size(methods))) == JNI_OK;
  env->DeleteLocalRef(c);
  return ok;
}

}  // namespace jvmbench

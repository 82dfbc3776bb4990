// SPDX-License-Identifier: MIT
// The embedded collector's object memory (object_memory.cpp): a thread's next objects reuse
// the blocks its collections freed; the cache is bounded, gives back sizes it no longer frees,
// and closes at thread exit; over-aligned, large and throwing objects are served right.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/gc/collector.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/object_memory.hpp"
#include "palrt/gc/object.hpp"

using namespace palrt::gc;
using palrt::gc::internal::object_memory_cache_bytes;
using palrt::gc::internal::object_memory_cached;
using palrt::gc::internal::this_thread_object_memory;

namespace {

template <std::size_t Bytes>
struct sized : object {
  char payload[Bytes] = {};
};

struct alignas(64) over_aligned : object {
  char payload[8] = {};
};

struct throwing : object {
  throwing() { throw std::runtime_error("constructor"); }
};

// Makes and drops `n` objects of T, then collects until they are all freed (on this thread).
template <class T>
void churn(collector& gc, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) make_object<T>(gc).reset();
  gc.collect();
  REQUIRE(gc.synchronize());
}

}  // namespace

TEST_CASE("object memory: a thread's next objects reuse the blocks its collection freed") {
  handle_table table;
  collector gc(table);
  trim_object_memory();
  churn<sized<16>>(gc, 1000);
  const auto after_first = this_thread_object_memory();
  if constexpr (!object_memory_cached) {
    // Sanitizer builds: every block goes back to the global allocator at once.
    CHECK(after_first.cached_blocks == 0);
    CHECK(after_first.reused == 0);
    return;
  }
  CHECK(after_first.cached_blocks == 1000);
  churn<sized<16>>(gc, 1000);
  const auto after_second = this_thread_object_memory();
  CHECK(after_second.reused - after_first.reused == 1000);
  CHECK(after_second.allocated == after_first.allocated);  // nothing new from operator new
  CHECK(after_second.cached_blocks == 1000);
  trim_object_memory();
  CHECK(this_thread_object_memory().cached_blocks == 0);
  CHECK(this_thread_object_memory().cached_bytes == 0);
}

TEST_CASE("object memory: a thread keeps at most the bound; past it, frees go to the global allocator") {
  if constexpr (!object_memory_cached) return;  // nothing is cached (see the first case)
  handle_table table;
  collector gc(table);
  trim_object_memory();
  const std::size_t block = (sizeof(sized<40>) + 15) / 16 * 16;  // its size class
  const std::size_t fits = object_memory_cache_bytes / block;
  const auto before = this_thread_object_memory();
  churn<sized<40>>(gc, fits + 500);
  const auto after = this_thread_object_memory();
  CHECK(after.cached_bytes <= object_memory_cache_bytes);
  CHECK(after.cached_blocks == fits);
  CHECK(after.spilled - before.spilled == 500);
  trim_object_memory();
}

TEST_CASE("object memory: a full cache gives back the size it was freed into longest ago, not the one in use") {
  if constexpr (!object_memory_cached) return;  // nothing is cached (see the first case)
  handle_table table;
  collector gc(table);
  trim_object_memory();
  churn<sized<100>>(gc, 100);  // a size this thread then stops using
  const std::size_t stale = this_thread_object_memory().cached_bytes;
  REQUIRE(stale > 0);
  const auto before = this_thread_object_memory();
  // Enough of another size to fill the cache: the stale blocks make room, these stay cached.
  const std::size_t block = (sizeof(sized<16>) + 15) / 16 * 16;  // its size class
  churn<sized<16>>(gc, object_memory_cache_bytes / block);
  const auto after = this_thread_object_memory();
  CHECK(after.lists_released - before.lists_released == 1);
  CHECK(after.spilled == before.spilled);
  CHECK(after.cached_bytes == object_memory_cache_bytes / block * block);  // all of it the size in use
  trim_object_memory();
}

TEST_CASE("object memory: over-aligned and large objects, and a constructor that throws") {
  handle_table table;
  collector gc(table);
  {
    std::vector<ref<over_aligned>> aligned;
    for (int i = 0; i < 64; ++i) aligned.push_back(make_object<over_aligned>(gc));
    for (const auto& r : aligned) CHECK(reinterpret_cast<std::uintptr_t>(r.get()) % 64 == 0);
    ref<sized<4096>> large = make_object<sized<4096>>(gc);
    large->payload[4095] = 1;
  }
  gc.collect();
  REQUIRE(gc.synchronize());
  trim_object_memory();
  const auto before = this_thread_object_memory();
  CHECK_THROWS_AS(make_object<throwing>(gc), std::runtime_error);
  const auto after = this_thread_object_memory();
  // The block went back (into the cache where there is one), and nothing was counted as made.
  if constexpr (object_memory_cached) CHECK(after.cached_blocks == before.cached_blocks + 1);
  CHECK(gc.counters().objects_created == 65);
  trim_object_memory();
}

namespace {
// Destroyed after the thread's memory cache closed (constructed before the cache registered
// its exit hook): the objects it frees then go to the global allocator.
struct frees_after_cache_closed {
  collector* gc = nullptr;
  ref<sized<16>> object;
  std::size_t cached_after = SIZE_MAX;
  bool* done = nullptr;
  ~frees_after_cache_closed() {
    if (!gc) return;
    object.reset();
    gc->collect();
    (void)gc->synchronize();
    cached_after = this_thread_object_memory().cached_bytes;
    *done = cached_after == 0;
  }
};
thread_local frees_after_cache_closed late_freer;
}  // namespace

TEST_CASE("object memory: a thread's cache closes at its exit; objects freed later in its exit go to the global "
          "allocator") {
  handle_table table;
  collector gc(table);
  bool done = false;
  std::size_t cached_before_exit = 0;
  std::thread([&] {
    late_freer.gc = &gc;  // constructed first: destroyed after the cache's exit hook
    late_freer.done = &done;
    late_freer.object = make_object<sized<16>>(gc);
    churn<sized<16>>(gc, 100);  // the cache opens (its exit hook registered) and holds blocks
    cached_before_exit = this_thread_object_memory().cached_blocks;
  }).join();
  if constexpr (object_memory_cached) CHECK(cached_before_exit == 100);
  CHECK(done);
  CHECK(gc.counters().objects_freed == 101);
}

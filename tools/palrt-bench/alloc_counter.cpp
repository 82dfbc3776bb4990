// SPDX-License-Identifier: MIT
// palrt-bench's replacement of the global operator new and delete: malloc and free, plus a
// count of allocations (alloc_counter.hpp). Replacing them is standard C++ ([new.delete]):
// the program's definitions take the place of the library's, for every translation unit and
// the static libstdc++ alike.
#include "alloc_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace palrt::bench {
namespace {

// One counter per thread slot, each on its own cache line: a shared counter would make every
// allocation of every thread contend on one line, which would slow the very baselines
// (new-delete, make_object) that other components measure with this operator new linked in.
struct alignas(64) allocation_shard {
  std::atomic<std::uint64_t> count{0};
};
constexpr unsigned shard_count = 64;
allocation_shard shards[shard_count];
std::atomic<unsigned> next_shard{0};
thread_local const unsigned my_shard = next_shard.fetch_add(1, std::memory_order_relaxed) % shard_count;

void count_one() noexcept {
  // relaxed: a count; readers only compare it before and after a measured slice, across
  // the synchronisation that ends the slice.
  shards[my_shard].count.fetch_add(1, std::memory_order_relaxed);
}

void* counted_malloc(std::size_t size) {
  count_one();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

void* counted_aligned(std::size_t size, std::align_val_t alignment) {
  count_one();
  const auto align = static_cast<std::size_t>(alignment);
  const std::size_t rounded = (size + align - 1) / align * align;  // aligned_alloc wants a multiple
  if (void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded)) return p;
  throw std::bad_alloc();
}

}  // namespace

std::uint64_t heap_allocations() noexcept {
  std::uint64_t n = 0;
  for (const auto& shard : shards) n += shard.count.load(std::memory_order_relaxed);
  return n;
}

}  // namespace palrt::bench

using palrt::bench::counted_aligned;
using palrt::bench::counted_malloc;

void* operator new(std::size_t size) { return counted_malloc(size); }
void* operator new[](std::size_t size) { return counted_malloc(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_malloc(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_malloc(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t alignment) { return counted_aligned(size, alignment); }
void* operator new[](std::size_t size, std::align_val_t alignment) { return counted_aligned(size, alignment); }
// The aligned nothrow forms too: left to the library, a sanitizer's runtime serves them with
// its own operator new[] and then sees our delete free what it allocated (a mismatch report).
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(size, alignment);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

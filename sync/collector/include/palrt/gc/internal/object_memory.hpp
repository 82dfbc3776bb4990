// SPDX-License-Identifier: MIT
// The memory of the embedded collector's objects: a bounded cache per thread in front of the
// global operator new (object_memory.cpp states why and how).
//
// object::operator new and delete (object.hpp) come here. A block freed by a thread is kept
// on that thread's list for its size class, and the next object of that class the thread
// makes reuses it, latest freed first. A thread keeps at most
// `object_memory_cache_bytes` this way; beyond that, and for objects larger than
// `object_memory_max_size` or aligned above the default, blocks go to the global operator
// delete at once. A thread's cached blocks go back to the global allocator when it exits
// (or when it calls trim_object_memory()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace palrt::gc::internal {

// Size classes: multiples of 16 bytes up to 256.
inline constexpr std::size_t object_memory_granule = 16;
inline constexpr std::size_t object_memory_max_size = 256;
inline constexpr std::size_t object_memory_classes = object_memory_max_size / object_memory_granule;
// What one thread may keep cached, over all classes.
inline constexpr std::size_t object_memory_cache_bytes = 512 * 1024;

// Whether this build caches at all. Not under AddressSanitizer or ThreadSanitizer: a block
// reused by the cache would hide a use after free from the one, and the reuse of a block by
// another thread (which the cache's thread-local lists do not synchronise: the collector's
// grace period does) from the other.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool object_memory_cached = false;
#else
inline constexpr bool object_memory_cached = true;
#endif

// A block of at least `size` bytes (std::bad_alloc if there is none), aligned to
// __STDCPP_DEFAULT_NEW_ALIGNMENT__.
void* allocate_object_memory(std::size_t size);
// Gives back a block allocate_object_memory(size) returned, with the same size (on any
// thread).
void free_object_memory(void* p, std::size_t size) noexcept;

// The calling thread's cache (for tests and diagnostics).
struct object_memory_stats {
  std::size_t cached_blocks = 0;
  std::size_t cached_bytes = 0;
  std::uint64_t reused = 0;          // allocations served from the cache
  std::uint64_t allocated = 0;       // allocations that went to operator new
  std::uint64_t spilled = 0;         // frees that went to operator delete: the cache was full
  std::uint64_t lists_released = 0;  // lists of other sizes given back to make room
};
object_memory_stats this_thread_object_memory() noexcept;

}  // namespace palrt::gc::internal

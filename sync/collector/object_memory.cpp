// SPDX-License-Identifier: MIT
// The embedded collector's object memory: a bounded free list per thread and size class in
// front of the global operator new.
//
// Why. The collector frees in batches: an automatic collection frees the thousands of objects
// its thread retired a collection earlier, one after another. glibc's per-thread cache holds 7
// blocks per size, so nearly all of a batch goes past it into the arena's bins (an atomic per
// free), and the thread's next thousands of make_object calls take them back one by one
// through the arena's lock. In `palrt-bench finalizer` (create-drop) that was half the CPU of
// every object: 58-66 ns per object made and dropped on one thread, 26-32 ns with this cache
// (docs/BENCHMARKS.md). The list here takes a batch whole and serves the thread's next
// objects from it, latest freed first (cache-warm), with a load and a store.
//
// How. Per thread (constinit thread_local, no registration on the fast path): one list per
// 16-byte size class up to 256 bytes, linked through the blocks themselves, and the bytes
// held over all classes, at most object_memory_cache_bytes. A block is allocated at its
// class's size, so any object of the class fits it; the sized operator delete of the object's
// dynamic type (its virtual destructor) tells which class it is in. A block made on one
// thread and freed on another joins the freeing thread's list (the collecting thread frees
// objects other threads made): the cache moves memory between threads the way glibc's does,
// and the bound caps what any thread keeps. A free that would pass the bound first gives
// back whole lists of other sizes, the one freed onto longest ago first (a size the thread
// stopped freeing would otherwise hold the cache for good and send every other size to the
// global allocator); only when its own size holds all of the bound does the block go to the
// global operator delete. Nothing here synchronises: each list has one thread; a block's
// reuse by that thread happens after its free on that thread.
//
// Thread exit: the first block a thread caches registers a thread_local destructor, which
// gives the thread's blocks to the global operator delete and marks the cache closed; frees
// after that (a thread_local destructor that runs later and drops the last reference of an
// object that a collection then frees) go straight to the global allocator. fork(): the child's
// thread keeps its copy of the forking thread's cache; the other threads' caches are lost with
// the threads, as glibc's are.
#include "palrt/gc/internal/object_memory.hpp"

#include <array>
#include <new>

#include "palrt/gc/object.hpp"

namespace palrt::gc::internal {

namespace {

struct free_block {
  free_block* next;
};

enum class cache_state : std::uint8_t { unregistered, open, closed };

struct thread_cache {
  std::array<free_block*, object_memory_classes> lists;
  std::array<std::size_t, object_memory_classes> list_bytes;
  // When each list last had a block freed onto it, in frees of this thread: a full cache gives
  // back the list left alone longest first.
  std::array<std::uint64_t, object_memory_classes> last_free;
  std::uint64_t frees;
  std::size_t bytes;  // held over all lists
  cache_state state;
  object_memory_stats counts;  // cached_* unused: computed on demand
};

constinit thread_local thread_cache cache{};

constexpr std::size_t class_of(std::size_t size) noexcept { return size == 0 ? 0 : (size - 1) / object_memory_granule; }
constexpr std::size_t class_size(std::size_t cls) noexcept { return (cls + 1) * object_memory_granule; }

void release_list(thread_cache& c, std::size_t cls) noexcept {
  for (free_block* b = c.lists[cls]; b;) {
    free_block* next = b->next;
    ::operator delete(b, class_size(cls));
    b = next;
  }
  c.lists[cls] = nullptr;
  c.bytes -= c.list_bytes[cls];
  c.list_bytes[cls] = 0;
}

void release_all(thread_cache& c) noexcept {
  for (std::size_t cls = 0; cls < object_memory_classes; ++cls) release_list(c, cls);
}

// Makes room for `bytes` more in list `keep` by giving back other lists, the one freed onto
// longest ago first (blocks of a size the thread no longer frees would otherwise hold the
// cache for good and send every other size to the global allocator). False if `keep` alone
// holds too much.
bool make_room(thread_cache& c, std::size_t keep, std::size_t bytes) noexcept {
  while (c.bytes + bytes > object_memory_cache_bytes) {
    std::size_t oldest = object_memory_classes;
    for (std::size_t cls = 0; cls < object_memory_classes; ++cls)
      if (cls != keep && c.lists[cls] && (oldest == object_memory_classes || c.last_free[cls] < c.last_free[oldest]))
        oldest = cls;
    if (oldest == object_memory_classes) return false;
    ++c.counts.lists_released;
    release_list(c, oldest);
  }
  return true;
}

struct cache_owner {
  ~cache_owner() {
    cache.state = cache_state::closed;
    release_all(cache);
  }
};

// Registers the exit hook; false if the thread is past it (its exit hook already ran).
bool open_cache() noexcept {
  if (cache.state == cache_state::closed) return false;
  static thread_local cache_owner owner;  // registered here, once per thread
  (void)owner;
  cache.state = cache_state::open;
  return true;
}

}  // namespace

void* allocate_object_memory(std::size_t size) {
  if constexpr (object_memory_cached) {
    if (size <= object_memory_max_size) [[likely]] {
      const std::size_t cls = class_of(size);
      if (free_block* b = cache.lists[cls]) [[likely]] {
        cache.lists[cls] = b->next;
        cache.list_bytes[cls] -= class_size(cls);
        cache.bytes -= class_size(cls);
        ++cache.counts.reused;
        return b;
      }
      ++cache.counts.allocated;
      return ::operator new(class_size(cls));
    }
  }
  return ::operator new(size);
}

void free_object_memory(void* p, std::size_t size) noexcept {
  if constexpr (object_memory_cached) {
    if (size <= object_memory_max_size) [[likely]] {
      const std::size_t cls = class_of(size);
      const std::size_t bytes = class_size(cls);
      if (cache.state == cache_state::open || open_cache()) [[likely]] {
        if (cache.bytes + bytes <= object_memory_cache_bytes || make_room(cache, cls, bytes)) [[likely]] {
          auto* b = static_cast<free_block*>(p);
          b->next = cache.lists[cls];
          cache.lists[cls] = b;
          cache.list_bytes[cls] += bytes;
          cache.bytes += bytes;
          cache.last_free[cls] = ++cache.frees;
          return;
        }
        ++cache.counts.spilled;
      }
      ::operator delete(p, bytes);
      return;
    }
  }
  ::operator delete(p, size);
}

object_memory_stats this_thread_object_memory() noexcept {
  object_memory_stats s = cache.counts;
  s.cached_bytes = cache.bytes;
  for (std::size_t cls = 0; cls < object_memory_classes; ++cls)
    for (free_block* b = cache.lists[cls]; b; b = b->next) ++s.cached_blocks;
  return s;
}

}  // namespace palrt::gc::internal

namespace palrt::gc {

void* object::operator new(std::size_t size) { return internal::allocate_object_memory(size); }

void object::operator delete(void* p, std::size_t size) noexcept { internal::free_object_memory(p, size); }

void* object::operator new(std::size_t size, std::align_val_t alignment) { return ::operator new(size, alignment); }

void object::operator delete(void* p, std::size_t size, std::align_val_t alignment) noexcept {
  ::operator delete(p, size, alignment);
}

void trim_object_memory() noexcept { internal::release_all(internal::cache); }

}  // namespace palrt::gc

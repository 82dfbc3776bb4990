// SPDX-License-Identifier: MIT
// Not API: the handle table's layout as its inline fast paths (handle_table.hpp) see it. A
// host never names anything here; it is installed only because inline code in a public
// header needs it, in the manner of liburcu's urcu/static/ headers, and may change in any
// release. The protocol is stated in handle_table.hpp and handle_table.cpp. It compiles on
// its own, but only handle_table.hpp includes it.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace palrt::gc {

class handle_table;
enum class handle_kind : std::uint8_t;

namespace detail {

inline constexpr std::size_t handle_kinds = 5;  // = handle_kind_count (checked there)

// A block is 1 KiB aligned to 1 KiB, so masking a slot's address finds its header. 1 KiB
// keeps a sweep's walk dense (two 64-bit masks per 120 slots) while a table that holds a few
// handles stays small. The header is one cache line.
inline constexpr std::size_t handle_block_bytes = 1024;
inline constexpr std::size_t handle_block_header_bytes = 64;
inline constexpr std::size_t handle_block_slots =
    (handle_block_bytes - handle_block_header_bytes) / sizeof(std::atomic<void*>);
inline constexpr std::uint64_t handle_block_magic = 0x6b636f6c62746c70;  // "pltblock"

struct alignas(handle_block_bytes) handle_block {
  std::uint64_t magic = handle_block_magic;
  const handle_table* owner;
  handle_kind kind;
  // This kind's blocks, newest first. Written once, before the block is published; read by
  // sweeps without a lock (acquire: the header and slots are initialised before).
  std::atomic<handle_block*> next{nullptr};
  // Bit i set: slot i is handed out of the block (holds a handle, or sits free in a
  // thread's cache or in a batch of the kind's depot). Set only under the kind's lock
  // (refill); cleared lock-free (a cache returning slots). 120 slots, two words.
  std::atomic<std::uint64_t> taken[2] = {};
  // Dependent blocks only: each slot's secondary. Null for the other kinds.
  std::atomic<void*>* secondaries = nullptr;
  // The block's age (the lowest generation its targets may be in), in its kind's directory
  // of blocks, where the walks read the ages of many blocks at once (block_directory.hpp).
  // Set before the block is published; the byte itself is written by mark_young() and by
  // handle_table::age_handles().
  std::atomic<std::uint8_t>* age = nullptr;
  alignas(handle_block_header_bytes) std::atomic<void*> slots[handle_block_slots];

  static handle_block* of(const std::atomic<void*>* slot) noexcept {
    return reinterpret_cast<handle_block*>(reinterpret_cast<std::uintptr_t>(slot) & ~(handle_block_bytes - 1));
  }
  std::size_t index_of(const std::atomic<void*>* slot) const noexcept { return static_cast<std::size_t>(slot - slots); }
};
static_assert(sizeof(handle_block) == handle_block_bytes);
static_assert(offsetof(handle_block, age) + sizeof(void*) <= handle_block_header_bytes);
static_assert(offsetof(handle_block, slots) == handle_block_header_bytes);

// The value a slot holds while it is free (in a thread's cache, or never handed out): the
// address of a private byte, so it can equal no host object. Sweeps skip it; release()
// finding it means the handle was released before.
inline constexpr char free_slot_marker_byte = 0;
inline void* free_slot_marker() noexcept { return const_cast<char*>(&free_slot_marker_byte); }

// Makes the block of `slot` young (age 0), for a store of a target into it: called before the
// store and again after it (handle_table.hpp, "Generations": the second look repairs an age
// that a collection raised while the storing thread was stopped between the two). A load of
// a byte a collection writes once per block, and a store only when it was not young already.
// relaxed: a generational walk reads ages with the world stopped, and the host's stop
// orders this thread's stores before the walk's reads.
inline void mark_young(const std::atomic<void*>* slot) noexcept {
  std::atomic<std::uint8_t>* age = handle_block::of(slot)->age;
  if (age->load(std::memory_order_relaxed) != 0) [[unlikely]]
    age->store(0, std::memory_order_relaxed);
}

// One thread's free slots of one table and kind. Only its thread touches it.
struct handle_cache {
  // A thread holding up to ~capacity/2 handles at a time never touches the blocks; beyond
  // that, one refill or return per `batch` pairs (a batch moved through the kind's depot with
  // one compare-exchange; the blocks, under the kind's lock or one atomic per block word,
  // when the depot has no batch or no room). 2 KiB per table and kind for each thread that
  // uses it.
  static constexpr std::uint32_t capacity = 256;
  static constexpr std::uint32_t batch = 128;  // slots moved per refill or return
  std::uint32_t count = 0;
  // Refills from the blocks while may_take_any_shard was false (saturating). Beside count, in
  // the 8 bytes before slots: the fast paths read count and the slots beside it.
  std::uint16_t block_refills = 0;
  // Set once the cache overflowed (gave slots back), or once it refilled from the blocks as
  // many times as its depot may hold batches (a thread that only allocates, while others
  // release): from then on a refill may take a batch another CPU's shard of the depot holds
  // (batch_depot::take says why not before).
  bool may_take_any_shard = false;
  std::atomic<void*>* slots[capacity];
};
static_assert(offsetof(handle_cache, slots) == 8);

// 128-byte aligned, a multiple of 128 bytes: nothing another thread writes shares a pair of
// cache lines with a thread's caches (x86's spatial prefetchers pull lines in pairs). Placed
// by the allocator beside memory the other thread wrote (a main thread's caches sit in the
// heap its blocks of slots come from), they cost two threads sharing one table about half
// their throughput: a loop of 1024 allocate + release pairs per thread, the main thread and
// one other on a 2-vCPU VM, 5.1-8.3 ns per pair (aggregate) before, 3.1-4.0 (one run 6.0)
// after; tables of their own, 2.9-3.1.
struct alignas(128) handle_table_caches {
  handle_cache kinds[handle_kinds];
};

// The calling thread's last table (by serial) and its caches for it: the fast paths' one
// compare. Another table, or a thread's first use, takes the slow path (handle_cache.cpp).
struct thread_cache_hint {
  std::uint64_t serial;
  handle_table_caches* caches;
};
extern constinit thread_local thread_cache_hint current_thread_cache;

}  // namespace detail
}  // namespace palrt::gc

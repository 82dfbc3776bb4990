// The handle table's memory: blocks of slots, the per-kind state, and the per-thread caches
// of free slots. Internal to the handle table (and its tests); the protocol is stated in
// handle_table.hpp and handle_table.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "palrt/sync/handle_table.hpp"

namespace palrt::sync::internal {

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
  // thread's cache). Set only under the kind's lock (refill); cleared lock-free (a cache
  // returning slots). 120 slots, two words.
  std::atomic<std::uint64_t> taken[2] = {};
  // Dependent blocks only: each slot's secondary. Null for the other kinds.
  std::atomic<void*>* secondaries = nullptr;
  alignas(handle_block_header_bytes) std::atomic<void*> slots[handle_block_slots];

  static handle_block* of(const std::atomic<void*>* slot) noexcept {
    return reinterpret_cast<handle_block*>(reinterpret_cast<std::uintptr_t>(slot) &
                                           ~(handle_block_bytes - 1));
  }
  std::size_t index_of(const std::atomic<void*>* slot) const noexcept {
    return static_cast<std::size_t>(slot - slots);
  }
};
static_assert(sizeof(handle_block) == handle_block_bytes);
static_assert(offsetof(handle_block, slots) == handle_block_header_bytes);

// The value a slot holds while it is free (in a thread's cache, or never handed out): the
// address of a private byte, so it can equal no host object. Sweeps skip it; release()
// finding it means the handle was released before.
inline constexpr char free_slot_marker_byte = 0;
inline void* free_slot_marker() noexcept { return const_cast<char*>(&free_slot_marker_byte); }

// One thread's free slots of one table and kind. Only its thread touches it.
struct handle_cache {
  // A thread holding up to ~capacity/2 handles at a time never touches the blocks; beyond
  // that, one refill or return per `batch` pairs (under the kind's lock, or one atomic per
  // block word). 2 KiB per table and kind for each thread that uses it.
  static constexpr std::uint32_t capacity = 256;
  static constexpr std::uint32_t batch = 128;  // slots moved per refill or return
  std::uint32_t count = 0;
  std::atomic<void*>* slots[capacity];
};

struct handle_table_caches {
  handle_cache kinds[handle_kind_count];
};

struct handle_kind_state {
  // Taken by refill (claiming free bits, growing the table); never on the fast path.
  std::mutex lock;
  // Free slots in this kind's blocks (bits clear). Raised by caches returning slots
  // (lock-free), lowered by refill under the lock; lets a refill that would find nothing grow
  // the table without walking every block. relaxed: a hint, the bits are the truth.
  std::atomic<std::size_t> free_in_blocks{0};
  std::atomic<handle_block*> blocks{nullptr};  // newest first (see handle_block::next)
  handle_block* cursor = nullptr;              // where the next refill starts looking
  std::atomic<std::size_t> block_count{0};     // relaxed: a statistic
};

struct handle_table_state {
  handle_kind_state kinds[handle_kind_count];
  // Every block of the table, sorted, for the checked builds' membership test.
  mutable std::mutex all_blocks_lock;
  std::vector<const handle_block*> all_blocks;
  // Test hook: the next n block allocations fail as if memory were exhausted.
  std::atomic<int> failing_allocations{0};
};

// Returns the oldest `n` slots of `cache`, all of the kind `kind`, to their blocks
// (lock-free: clears their bits).
void return_to_blocks(handle_kind_state& kind, handle_cache& cache, std::uint32_t n) noexcept;

// The live tables by serial, for threads that return their caches when they exit. Tables
// register on construction and leave on destruction under its lock, so an exiting thread
// never returns slots to a table being destroyed.
void register_table(std::uint64_t serial, handle_table_state* state);
void unregister_table(std::uint64_t serial) noexcept;

// The calling thread's caches for the table with this serial: the thread's last table is one
// compare away; another table, or the first use, takes the slow path (which may allocate and
// throw std::bad_alloc). Null once the thread is exiting and its caches were returned:
// callers then go to the blocks directly.
struct thread_cache_hint {
  std::uint64_t serial;
  handle_table_caches* caches;
};
extern constinit thread_local thread_cache_hint current_thread_cache;
handle_table_caches* thread_caches_slow(std::uint64_t serial);
inline handle_table_caches* thread_caches(std::uint64_t serial) {
  const thread_cache_hint hint = current_thread_cache;
  if (hint.serial == serial) [[likely]] return hint.caches;
  return thread_caches_slow(serial);
}

}  // namespace palrt::sync::internal

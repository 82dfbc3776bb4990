// SPDX-License-Identifier: MIT
// The handle table's private state: the per-kind state and the table's bookkeeping, and
// the slow paths' helpers. The block and cache layouts that the inline fast paths use are in
// palrt/gc/detail/handle_fast_path.hpp; the protocol is stated in handle_table.hpp and
// handle_table.cpp.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "palrt/gc/internal/batch_depot.hpp"
#include "palrt/gc/internal/block_chunks.hpp"
#include "palrt/gc/internal/block_directory.hpp"
#include "palrt/gc/internal/block_set.hpp"
#include "palrt/gc/internal/dependent_index.hpp"
#include "palrt/gc/internal/promotion_buckets.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/gc/handle_table.hpp"  // with detail/handle_fast_path.hpp

namespace palrt::gc::internal {

// The layout the inline fast paths share with the slow paths (detail/handle_fast_path.hpp),
// by the short names the slow paths use.
using detail::current_thread_cache;
using detail::free_slot_marker;
using detail::handle_block;
using detail::handle_block_header_bytes;
using detail::handle_block_magic;
using detail::handle_block_slots;
using detail::handle_cache;
using detail::handle_kinds;
using detail::handle_table_caches;
using detail::thread_cache_hint;

struct handle_kind_state {
  // Full caches return batches here and empty ones refill from here first, lock-free
  // (batch_depot.hpp); the blocks below serve what the depot cannot.
  std::unique_ptr<batch_depot> depot;
  // Taken by a refill the depot cannot serve (claiming free bits, growing the table); never
  // on the fast path.
  std::mutex lock;
  // Free slots in this kind's blocks (bits clear). Raised by caches returning slots
  // (lock-free), lowered by refill under the lock; lets a refill that would find nothing grow
  // the table without walking every block. relaxed: a hint, the bits are the truth.
  std::atomic<std::size_t> free_in_blocks{0};
  std::atomic<handle_block*> blocks{nullptr};  // newest first (see handle_block::next)
  // The same blocks by number, with their ages: what the walks go through (handle_walk.hpp).
  block_directory directory;
  handle_block* cursor = nullptr;           // where the next refill starts looking
  std::atomic<std::size_t> block_count{0};  // relaxed: a statistic
};

struct handle_table_state {
  // The memory of every block of the table (block_chunks.hpp), freed with the state: first,
  // so that it goes last.
  block_chunks chunks;
  handle_kind_state kinds[handle_kind_count];
  // Dependent handles by primary (handle_table_options::index_dependents), or null. An
  // indexed table's dependent blocks carry a node per slot after their secondaries
  // (dependent_nodes()).
  std::unique_ptr<dependent_index> dependents;
  // The bucket heads of dependent promotions (dependent_promotion.hpp), grown with the
  // dependent blocks.
  promotion_buckets promotion;
  // Every block of the table, for the checked builds' membership test: inserted under the
  // lock, read with none (block_set.hpp).
  std::mutex all_blocks_lock;
  block_set all_blocks;
  // Test hooks (handle_table_access::set_gated_read_hook, set_slot_walk_hook,
  // set_age_window_hook).
  void (*gated_read_hook)(void*) = nullptr;
  void* gated_read_hook_context = nullptr;
  void (*slot_walk_hook)(void*) = nullptr;
  void* slot_walk_hook_context = nullptr;
  void (*age_window_hook)(void*) = nullptr;
  void* age_window_hook_context = nullptr;
  // Test hooks: the next n block allocations fail as if memory were exhausted; the next n
  // allocations of a dependent block's secondaries, after its memory was carved.
  std::atomic<int> failing_allocations{0};
  std::atomic<int> failing_secondaries{0};
  // The collector that sweeps the table (claim_for_collector), or null.
  std::atomic<const void*> claimed_by{nullptr};
  // In a fork()ed child the table is its parent's: nothing takes its locks there.
  const pal::internal::fork_stamp made;
};

// A dependent block's side area: its secondaries, then its index nodes (indexed tables
// only), then its promotion links (dependent_promotion.hpp: one per slot, the next slot of
// the slot's chain, promotion_buckets.hpp).
inline dependent_index_node* dependent_nodes(const handle_block* block) noexcept {
  return reinterpret_cast<dependent_index_node*>(block->secondaries + handle_block_slots);
}
inline std::atomic<void*>** dependent_links(const handle_block* block, bool indexed) noexcept {
  char* after_secondaries = reinterpret_cast<char*>(block->secondaries + handle_block_slots);
  return reinterpret_cast<std::atomic<void*>**>(after_secondaries +
                                                (indexed ? handle_block_slots * sizeof(dependent_index_node) : 0));
}
inline constexpr std::size_t dependent_side_bytes(bool indexed) noexcept {
  return handle_block_slots *
         (sizeof(std::atomic<void*>) + (indexed ? sizeof(dependent_index_node) : 0) + sizeof(void*));
}
static_assert(handle_block_slots * sizeof(std::atomic<void*>) % alignof(dependent_index_node) == 0);

// Calls f(block, index) for each slot of `block` whose bit is set (a handle, or a free slot
// holding the free marker, which f skips).
template <class F>
inline void for_each_taken_slot(handle_block* block, F&& f) {
  for (std::size_t word = 0; word < 2; ++word) {
    // acquire: pairs with A' in handle_table.cpp (a slot claimed since is initialised when
    // it is read).
    std::uint64_t bits = block->taken[word].load(std::memory_order_acquire);
    while (bits) {
      const std::size_t index = word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      bits &= bits - 1;
      f(block, index);
    }
  }
}

// A sweep's clear of one slot found holding the dead `target`: 1 if it cleared it (and
// reported it with its secondary), 0 if the slot changed since it was read.
std::size_t clear_dead(handle_block* block, std::size_t i, void* target, void* on_cleared, detail::cleared_fn cleared);

// Returns the oldest `n` slots of `cache`, all of the kind `kind`, to their blocks
// (lock-free: clears their bits).
void return_to_blocks(handle_kind_state& kind, handle_cache& cache, std::uint32_t n) noexcept;

// The live tables by serial, for threads that return their caches when they exit. Tables
// register on construction and leave on destruction under its lock, so an exiting thread
// never returns slots to a table being destroyed.
void register_table(std::uint64_t serial, handle_table_state* state);
void unregister_table(std::uint64_t serial) noexcept;

// The calling thread's caches for the table with this serial, creating them on first use (may
// throw std::bad_alloc); null once the thread is exiting and its caches were returned.
handle_table_caches* thread_caches_slow(std::uint64_t serial);

}  // namespace palrt::gc::internal

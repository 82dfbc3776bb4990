// SPDX-License-Identifier: MIT
// The walks: every pass over a kind's handles, parallel or not, generational or not
// (handle_walk.hpp states the contract).
//
// Protocol. The walk reads the kind's block count when it is made (block_directory.hpp, D')
// and covers those blocks: a handle allocated before that lives in one of them (a block is
// in the directory before any of its slots is handed out). GC threads claim ranges of
// claim_blocks block numbers with one fetch_add on next_; relaxed, because claiming is only
// a division of work: what a thread then reads of a block is ordered by the block's own
// publication (its taken bits, acquire, pair with the refill that set them, A'; its slots'
// targets, acquire, pair with the stores that put them there). Each block is claimed by
// exactly one thread, so the walk visits each slot once; the per-slot changes are
// compare-and-swaps from the value read, as before (a sweep racing a release or a
// set_target leaves the slot to them).
// A generational walk skips blocks whose age is above the condemned generation, reading the
// dense ages of the directory (one byte a block), with the world stopped.
#include "palrt/gc/handle_walk.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "palrt/gc/internal/handle_block.hpp"

namespace palrt::gc {

using detail::handle_block;

namespace {

// Blocks per claim: 3,840 handles, ~15-20 us of sweeping, against one fetch_add on a line
// the GC threads share (8 blocks scaled a 2-thread sweep of 1M handles no better, within the
// machine's noise; fewer claims cost less when more threads share a walk). A generational
// walk claims the same ranges and skips the blocks it does not condemn inside them.
constexpr std::size_t claim_blocks = 32;

const internal::block_directory& directory_of(const internal::handle_table_state& state, handle_kind kind) {
  return state.kinds[static_cast<std::size_t>(kind)].directory;
}

bool is_swept(handle_kind kind) noexcept {
  return kind == handle_kind::weak_short || kind == handle_kind::weak_long || kind == handle_kind::dependent;
}

void require_swept_kind(handle_kind kind, const char* operation) {
  if (!is_swept(kind))
    throw std::invalid_argument(std::string("palrt: handle_walk::") + operation +
                                ": only weak and dependent handles are swept (this walk is of " +
                                handle_kind_name(kind) + " handles)");
}

}  // namespace

handle_walk::handle_walk(const handle_table& table, handle_kind kind, std::uint8_t condemned)
    : table_(table), kind_(kind), condemned_(condemned), pad_{} {
  if (static_cast<std::size_t>(kind) >= handle_kind_count)
    throw std::invalid_argument("palrt: handle_walk: unknown handle kind");
  end_ = directory_of(*table.state_, kind).size();
}

bool handle_walk::claim(std::size_t& begin, std::size_t& end) noexcept {
  const internal::block_directory& directory = directory_of(*table_.state_, kind_);
  for (;;) {
    // relaxed: a division of work (see the top of this file). A look first, so that threads
    // arriving after the end do not push next_ on and on.
    if (next_.load(std::memory_order_relaxed) >= end_) return false;
    const std::size_t first = next_.fetch_add(claim_blocks, std::memory_order_relaxed);
    if (first >= end_) return false;
    const std::size_t last = std::min(end_, first + claim_blocks);
    begin = condemned_ == all_generations ? first : directory.next_condemned(first, last, condemned_);
    end = last;
    if (begin < end) return true;
  }
}

template <class F>
void handle_walk::for_each_claimed_slot(F&& f) {
  const internal::block_directory& directory = directory_of(*table_.state_, kind_);
  std::size_t begin, end;
  while (claim(begin, end)) {
    for (std::size_t i = begin; i < end; ++i) {
      if (condemned_ != all_generations && directory.age(i).load(std::memory_order_relaxed) > condemned_) continue;
      internal::for_each_taken_slot(directory.block(i), f);
    }
  }
}

std::size_t handle_walk::sweep_erased(void* is_alive, detail::predicate_fn alive, void* on_cleared,
                                      detail::cleared_fn cleared) {
  require_swept_kind(kind_, "sweep");
  void* const marker = detail::free_slot_marker();
  std::size_t count = 0;
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    void* target = block->slots[i].load(std::memory_order_acquire);
    if (!target || target == marker || alive(is_alive, target)) return;
    count += internal::clear_dead(block, i, target, on_cleared, cleared);
  });
  return count;
}

std::size_t handle_walk::sweep_batched_erased(void* is_alive, detail::batch_fn alive, void* on_cleared,
                                              detail::cleared_fn cleared) {
  require_swept_kind(kind_, "sweep_batched");
  void* const marker = detail::free_slot_marker();
  std::size_t count = 0;
  // On the stack: no allocation, so it may run with the world stopped.
  constexpr std::size_t batch = handle_table::sweep_batch;
  void* targets[batch];
  bool live[batch];
  handle_block* blocks[batch];
  std::uint16_t indices[batch];
  std::size_t n = 0;
  auto flush = [&] {
    alive(is_alive, std::span<void* const>(targets, n), std::span<bool>(live, n));
    for (std::size_t j = 0; j < n; ++j) {
      if (!live[j]) count += internal::clear_dead(blocks[j], indices[j], targets[j], on_cleared, cleared);
    }
    n = 0;
  };
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    void* target = block->slots[i].load(std::memory_order_acquire);
    if (!target || target == marker) return;
    targets[n] = target;
    live[n] = true;  // a test that sets nothing keeps everything
    blocks[n] = block;
    indices[n] = static_cast<std::uint16_t>(i);
    if (++n == batch) flush();
  });
  if (n) flush();
  return count;
}

std::size_t handle_walk::sweep_relocate_erased(void* forward, detail::forward_fn to, void* on_cleared,
                                               detail::cleared_fn cleared) {
  require_swept_kind(kind_, "sweep_relocate");
  void* const marker = detail::free_slot_marker();
  std::size_t count = 0;
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    std::atomic<void*>& slot = block->slots[i];
    void* target = slot.load(std::memory_order_acquire);
    if (!target || target == marker) return;
    void* moved = to(forward, target);
    if (!moved) {
      count += internal::clear_dead(block, i, target, on_cleared, cleared);
      return;
    }
    // A plain store, not handle_slot::relocate()'s compare-and-swap: with the world stopped
    // no thread writes the slot between this read and this store (a thread stopped inside a
    // release or a set_target stores after it resumes, and its store wins, as it should), and
    // a locked instruction per moved handle cost 1.5x a sweep (docs/BENCHMARKS.md). release:
    // the object's copy before a reader of the slot.
    if (moved != target) slot.store(moved, std::memory_order_release);
    if (block->secondaries) {
      std::atomic<void*>& second = block->secondaries[i];
      void* s = second.load(std::memory_order_acquire);
      if (!s) return;
      void* s_moved = to(forward, s);
      if (s_moved && s_moved != s) second.store(s_moved, std::memory_order_release);
    }
  });
  return count;
}

void handle_walk::for_each_target_erased(void* visit, detail::visit_fn fn) {
  void* const marker = detail::free_slot_marker();
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    void* target = block->slots[i].load(std::memory_order_acquire);
    if (target && target != marker) fn(visit, target);
  });
}

void handle_walk::for_each_slot_erased(void* visit, detail::slot_fn fn) {
  void* const marker = detail::free_slot_marker();
  const internal::handle_table_state& state = *table_.state_;
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    if (block->slots[i].load(std::memory_order_acquire) == marker) return;
    // The handle may be released from here on (the visit's reads say so: handle_slot).
    if (auto hook = state.slot_walk_hook) [[unlikely]]
      hook(state.slot_walk_hook_context);
    fn(visit, handle_slot(&block->slots[i], block->secondaries ? &block->secondaries[i] : nullptr));
  });
}

std::size_t handle_walk::promote_erased(void* is_alive, detail::predicate_fn alive, void* mark, detail::visit_fn fn) {
  if (kind_ != handle_kind::dependent)
    throw std::invalid_argument("palrt: handle_walk::promote_dependents: the walk is not of dependent handles");
  void* const marker = detail::free_slot_marker();
  std::size_t count = 0;
  for_each_claimed_slot([&](handle_block* block, std::size_t i) {
    void* primary = block->slots[i].load(std::memory_order_acquire);
    if (!primary || primary == marker || !alive(is_alive, primary)) return;
    void* secondary = block->secondaries[i].load(std::memory_order_acquire);
    if (secondary && !alive(is_alive, secondary)) {
      fn(mark, secondary);
      ++count;
    }
  });
  return count;
}

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// The handle table: blocks, refill and return, release, sweeps. The per-thread caches and
// the registry of live tables are in handle_cache.cpp.
//
// Protocol (who writes what):
//   - A block's `taken` bits are set only by refill, under the kind's lock, and cleared only
//     by a thread returning slots from its own cache (fetch_and, no lock). So a bit refill
//     sees clear stays clear until refill itself sets it.
//   - A slot's value: the free marker while the slot is free; a target (or null) while it is
//     a handle. allocate() stores the target (release: publishes the target's and, for a
//     dependent handle, the secondary's initialisation); release() exchanges it back to the
//     marker (acq_rel: a second release sees the marker, even racing); a sweep clears a dead
//     target with compare-exchange, so it never overwrites a newer value.
//   - A free slot travels: release() puts it in the releasing thread's cache; from there it
//     is allocated again by that thread, or moves in a batch of handle_cache::batch through
//     the kind's depot (batch_depot.cpp: one compare-exchange each way, no bit or slot
//     changes, ordered by the depot's own release/acquire pair) to the cache of the thread
//     that refills next, or is returned to its block (clearing its bit, with release ordering
//     so the marker store is visible to the next refill that claims it: A, paired with the
//     acquire in refill, A'). A full cache returns a batch to the depot, or to the blocks
//     when the depot has no container to spare; an empty cache refills from the depot, or,
//     when it has no batch, from the blocks under the kind's lock (growing the table if they
//     have no free slot either). A thread that exits returns its caches to the blocks, and
//     the batches it put last on a shard (batch_depot::take_left_by).
//   - So a slot's bit is set exactly while the slot is a handle or free in a cache, the depot
//     or a thread moving a batch; sweeps, iteration and counters read only bits and slots,
//     and skip the free marker, so none of them depends on where a free slot is.
#include "palrt/gc/handle_table.hpp"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "palrt/gc/handle_walk.hpp"
#include "palrt/gc/internal/handle_block.hpp"
#include "palrt/pal/fork.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"
#include "palrt/pal/internal/futex.hpp"

#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PALRT_HANDLE_CHECKS 1
#else
#define PALRT_HANDLE_CHECKS 0
#endif

namespace palrt::gc {

const char* handle_kind_name(handle_kind kind) noexcept {
  switch (kind) {
    case handle_kind::strong: return "strong";
    case handle_kind::weak_short: return "weak-short";
    case handle_kind::weak_long: return "weak-long";
    case handle_kind::dependent: return "dependent";
    case handle_kind::pinned: return "pinned";
  }
  return "unknown";
}

handle_allocation_error::handle_allocation_error(handle_kind kind)
    : message_(std::string("palrt: handle table: cannot allocate a block for ") + handle_kind_name(kind) +
               " handles (out of memory); handles already allocated are intact") {}

namespace internal {

namespace {
constexpr std::uint64_t last_word_mask = (std::uint64_t{1} << (handle_block_slots - 64)) - 1;
constexpr std::uint64_t word_mask(std::size_t word) noexcept { return word == 0 ? ~std::uint64_t{0} : last_word_mask; }
}  // namespace

void return_to_blocks(handle_kind_state& kind, handle_cache& cache, std::uint32_t n) noexcept {
  n = std::min(n, cache.count);
  // Slots of one block word are cleared together (a cache's slots came mostly in runs from
  // the same block): one atomic operation per run, not per slot.
  std::atomic<std::uint64_t>* word = nullptr;
  std::uint64_t bits = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::atomic<void*>* slot = cache.slots[i];
    handle_block* block = handle_block::of(slot);
    const std::size_t index = block->index_of(slot);
    std::atomic<std::uint64_t>* w = &block->taken[index / 64];
    if (w != word) {
      // A: release, so the refill that claims these bits (A') sees the free markers stored
      // by release(), and nothing this thread wrote to the slots lands after their next
      // owner's writes.
      if (word) word->fetch_and(~bits, std::memory_order_release);
      word = w;
      bits = 0;
    }
    bits |= std::uint64_t{1} << (index % 64);
  }
  if (word) word->fetch_and(~bits, std::memory_order_release);
  std::memmove(cache.slots, cache.slots + n, (cache.count - n) * sizeof(cache.slots[0]));
  cache.count -= n;
  kind.free_in_blocks.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace internal

using detail::handle_block;
using detail::handle_cache;
using internal::handle_kind_state;

namespace {

std::atomic<std::uint64_t> next_table_serial{1};  // 0 is "no table" in the thread's hint

[[noreturn, gnu::cold, gnu::noinline]] void misuse(const char* operation, const void* h, const char* problem) noexcept {
  // stdio, not iostreams: this may run in a destructor during exit, with nothing else safe.
  std::fprintf(stderr, "palrt: handle_table::%s(%p): %s\n", operation, h, problem);
  std::fflush(stderr);
  std::abort();
}

// Test hooks: true if `failing` was positive, and counts it down.
bool take_failure(std::atomic<int>& failing) noexcept {
  int n = failing.load(std::memory_order_relaxed);
  while (n > 0 && !failing.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
  }
  return n > 0;
}

handle_block* new_block(internal::handle_table_state& state, const handle_table* owner, handle_kind kind) {
  if (take_failure(state.failing_allocations)) throw handle_allocation_error(kind);
  // Room in the kind's directory (and for a dependent block, in the promotions' buckets)
  // first, so that nothing below needs undoing for it.
  try {
    internal::block_directory& directory = state.kinds[static_cast<std::size_t>(kind)].directory;
    directory.reserve_one();
    if (kind == handle_kind::dependent) state.promotion.reserve((directory.size() + 1) * detail::handle_block_slots);
  } catch (const std::bad_alloc&) {
    throw handle_allocation_error(kind);
  }
  // From the table's chunks, not an aligned_alloc() per block (which costs glibc about twice
  // the block: block_chunks.hpp).
  void* memory = state.chunks.carve();
  if (!memory) throw handle_allocation_error(kind);
  // A dependent block's slot addresses go into promotion chains under an epoch byte
  // (promotion_buckets.hpp): never refused on Linux's user space, checked all the same.
  if (kind == handle_kind::dependent && !internal::promotion_buckets::fits(memory)) {
    state.chunks.give_back(memory);
    throw handle_allocation_error(kind);
  }
  std::atomic<void*>* secondaries = nullptr;
  const bool indexed = state.dependents != nullptr;
  if (kind == handle_kind::dependent) {
    if (!take_failure(state.failing_secondaries))
      secondaries = static_cast<std::atomic<void*>*>(std::malloc(internal::dependent_side_bytes(indexed)));
    if (!secondaries) {
      state.chunks.give_back(memory);
      throw handle_allocation_error(kind);
    }
    for (std::size_t i = 0; i < detail::handle_block_slots; ++i) new (&secondaries[i]) std::atomic<void*>(nullptr);
  }
  auto* block = new (memory) handle_block;
  block->owner = owner;
  block->kind = kind;
  block->secondaries = secondaries;
  for (auto& slot : block->slots) slot.store(detail::free_slot_marker(), std::memory_order_relaxed);
  if (secondaries && indexed) {
    internal::dependent_index_node* nodes = internal::dependent_nodes(block);
    for (std::size_t i = 0; i < detail::handle_block_slots; ++i) {
      auto* node = new (&nodes[i]) internal::dependent_index_node;
      node->slot = &block->slots[i];
      node->secondary = &secondaries[i];
    }
  }
  if (PALRT_HANDLE_CHECKS) {
    std::lock_guard lock(state.all_blocks_lock);
    try {
      state.all_blocks.insert(block);
    } catch (...) {
      std::free(secondaries);
      block->~handle_block();
      state.chunks.give_back(memory);
      throw handle_allocation_error(kind);
    }
  }
  return block;
}

// Its memory is its chunk's, freed with the table's state.
void free_block(handle_block* block) noexcept {
  std::free(block->secondaries);
  block->~handle_block();
}

// Claims up to `want` free slots of `block` into `cache` (under the kind's lock).
void claim_from(handle_block* block, handle_cache& cache, std::uint32_t want) noexcept {
  for (std::size_t word = 0; word < 2 && cache.count < want; ++word) {
    // relaxed: only this lock's holder sets bits, so a clear bit seen here stays clear.
    std::uint64_t free = ~block->taken[word].load(std::memory_order_relaxed) & internal::word_mask(word);
    std::uint64_t claim = 0;
    while (free && cache.count < want) {
      const std::uint64_t bit = free & -free;
      free ^= bit;
      claim |= bit;
      cache.slots[cache.count++] = &block->slots[word * 64 + static_cast<std::size_t>(std::countr_zero(bit))];
    }
    // A': acquire, pairs with A in return_to_blocks (the slot's last release is visible).
    if (claim) block->taken[word].fetch_or(claim, std::memory_order_acquire);
  }
}

// Fills `cache` with up to one batch of free slots of `kind`, growing the table if no block
// has any. Throws handle_allocation_error only when it found no slot at all.
void refill(internal::handle_table_state& state, const handle_table* owner, handle_kind kind, handle_cache& cache) {
  // The one place that takes a kind's lock, which in a fork()ed child may be held for good.
  if (state.made.forked()) throw pal::forked_child_error("handle_table::allocate");
  handle_kind_state& k = state.kinds[static_cast<std::size_t>(kind)];
  // A batch from the depot, lock-free: the steady state of threads whose working sets exceed
  // their caches, which used to serialize on the lock below.
  if (handle_cache::capacity - cache.count >= handle_cache::batch && k.depot->take(cache)) return;
  // Counted for batch_depot::take (a thread that only allocates may take from any shard after
  // enough of these); it compares when it has shards, so nothing here decides them.
  if (!cache.may_take_any_shard && cache.block_refills < UINT16_MAX) ++cache.block_refills;
  std::lock_guard lock(k.lock);
  const std::uint32_t want = std::min<std::uint32_t>(handle_cache::batch, handle_cache::capacity - cache.count);
  const std::uint32_t before = cache.count;
  if (k.free_in_blocks.load(std::memory_order_relaxed) > 0) {
    handle_block* head = k.blocks.load(std::memory_order_relaxed);
    handle_block* start = k.cursor ? k.cursor : head;
    handle_block* block = start;
    while (block) {
      claim_from(block, cache, before + want);
      if (cache.count == before + want) break;
      block = block->next.load(std::memory_order_relaxed);
      if (!block) block = head;
      if (block == start) break;
    }
    k.cursor = block;
    const std::size_t claimed = cache.count - before;
    // Only refill lowers it, under this lock; returns may raise it meanwhile.
    std::size_t free = k.free_in_blocks.load(std::memory_order_relaxed);
    while (!k.free_in_blocks.compare_exchange_weak(free, free >= claimed ? free - claimed : 0,
                                                   std::memory_order_relaxed)) {
    }
  }
  if (cache.count > before) return;
  handle_block* block = new_block(state, owner, kind);
  block->next.store(k.blocks.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // release: a sweep that finds the block through the list sees it initialised.
  k.blocks.store(block, std::memory_order_release);
  // To the walks (block_directory.hpp, D), before any of its slots is handed out. It holds
  // no target yet: old, so that only a full walk visits it until a target is stored.
  k.directory.add(block, all_generations);
  k.block_count.fetch_add(1, std::memory_order_relaxed);
  k.cursor = block;
  k.free_in_blocks.fetch_add(detail::handle_block_slots, std::memory_order_relaxed);
  claim_from(block, cache, before + want);
  k.free_in_blocks.fetch_sub(cache.count - before, std::memory_order_relaxed);
}

template <class F>
void for_each_used_slot(const handle_kind_state& k, F&& f) {
  for (handle_block* block = k.blocks.load(std::memory_order_acquire); block;
       block = block->next.load(std::memory_order_acquire))
    internal::for_each_taken_slot(block, f);
}

}  // namespace

handle_table::handle_table() : handle_table(handle_table_options{}) {}

handle_table::handle_table(handle_table_options options)
    : serial_(next_table_serial.fetch_add(1, std::memory_order_relaxed)),
      state_(std::make_unique<internal::handle_table_state>()) {
  if (options.index_dependents) state_->dependents = std::make_unique<internal::dependent_index>();
  // The depots' defaults: a shard per online CPU id and 8 batches per shard, a working set of
  // about 1024 handles per CPU beyond the caches, decided on a kind's first return, not here
  // (bootstrap() makes a table; batch_depot.hpp).
  for (auto& k : state_->kinds) k.depot = std::make_unique<internal::batch_depot>();
  internal::register_table(serial_, state_.get());
}

handle_table::~handle_table() {
  // After this no exiting thread returns slots here (they do so under the registry's lock).
  internal::unregister_table(serial_);
  const handle_counters c = counters();
  std::size_t in_use = 0;
  for (std::size_t n : c.handles) in_use += n;
  if (in_use > 0) {
    std::fprintf(stderr,
                 "palrt: handle_table destroyed with %zu handles still allocated; its %zu blocks "
                 "are left allocated so that those handles stay valid memory\n",
                 in_use, c.blocks);
    // Kept for the life of the process, reachable from a global (so leak checkers see it
    // as kept, not lost): those handles must stay valid memory.
    static auto* const orphans = new std::vector<std::unique_ptr<internal::handle_table_state>>;
    static std::mutex& lock = *[] {
      auto* m = new std::mutex;  // never destroyed; fork() holds it (a child may orphan too)
      pal::internal::hold_across_fork(*m, pal::internal::fork_lock_rank::leaf);
      return m;
    }();
    std::lock_guard guard(lock);
    orphans->push_back(std::move(state_));
    return;
  }
  for (auto& k : state_->kinds) {
    handle_block* block = k.blocks.load(std::memory_order_acquire);
    while (block) {
      handle_block* next = block->next.load(std::memory_order_relaxed);
      free_block(block);
      block = next;
    }
  }
}

handle_table_options handle_table::options() const noexcept {
  return handle_table_options{.index_dependents = state_->dependents != nullptr};
}

void handle_table::claim_for_collector(const void* owner) {
  if (!owner) throw std::invalid_argument("palrt: handle_table::claim_for_collector: a null collector");
  const void* expected = nullptr;
  // acquire (pairs with release_collector()'s release): a collector that claims the table
  // after another gave it up comes after everything that one's sweeps did.
  if (!state_->claimed_by.compare_exchange_strong(expected, owner, std::memory_order_acquire,
                                                  std::memory_order_relaxed))
    throw std::logic_error("palrt: this handle table is already swept by another collector; one collector per table");
}

void handle_table::release_collector(const void* owner) noexcept {
  const void* expected = owner;
  // release: see claim_for_collector(). relaxed on failure: not the claimant, nothing to do.
  state_->claimed_by.compare_exchange_strong(expected, nullptr, std::memory_order_release, std::memory_order_relaxed);
}

// Inlined into release(): the checks are a few compares of one cached line.
[[gnu::always_inline]] inline handle_block* handle_table::block_of(handle h, const char* operation) const noexcept {
  if (!h) misuse(operation, nullptr, "a null handle");
  const auto address = reinterpret_cast<std::uintptr_t>(h.slot_);
  handle_block* block = handle_block::of(h.slot_);
  if (address % alignof(std::atomic<void*>) != 0) misuse(operation, h.slot_, "not a handle of this table (misaligned)");
  // No lock (block_set.hpp): with the world stopped a stopped thread may hold the inserters'.
  if (PALRT_HANDLE_CHECKS && !state_->all_blocks.contains(block))
    misuse(operation, h.slot_, "not a handle of this table");
  if (block->magic != detail::handle_block_magic || block->owner != this)
    misuse(operation, h.slot_, "not a handle of this table");
  if (address - reinterpret_cast<std::uintptr_t>(block) < detail::handle_block_header_bytes)
    misuse(operation, h.slot_, "not a handle of this table (inside a block header)");
  return block;
}

namespace {

// Its address names a thread for the read gate: the closer reads through its own gate.
thread_local const char gate_thread = 0;

// Waits until the gate is no longer `closed` (odd), for a gated read or release that is not
// the closer's. seq_cst, then the gate once more: a waiter counts itself before its last
// look at the gate, so either it sees the gate open or open_tracking_reads() sees it waiting,
// and wakes it.
void wait_for_gate(std::atomic<std::uint32_t>& gate, std::atomic<std::uint32_t>& waiters,
                   std::uint32_t closed) noexcept {
  waiters.fetch_add(1, std::memory_order_seq_cst);
  if (gate.load(std::memory_order_seq_cst) == closed) pal::internal::futex_wait(gate, closed);
  waiters.fetch_sub(1, std::memory_order_relaxed);  // relaxed: only a count of sleepers
}

// The slow paths of allocate() and release(), out of line so that the fast paths (a slot
// from or to this thread's cache of the table it used last) stay a few instructions with no
// stack frame to speak of.

// A free slot for a thread whose cache of `kind` is empty, or that uses another table than
// last time, or has no cache (exiting: straight from the blocks).
[[gnu::noinline]] std::atomic<void*>* slot_from_cache_or_block(std::uint64_t serial,
                                                               internal::handle_table_state& state,
                                                               const handle_table* owner, handle_kind kind) {
  const auto k = static_cast<std::size_t>(kind);
  if (detail::handle_table_caches* caches = internal::thread_caches_slow(serial)) {
    handle_cache& cache = caches->kinds[k];
    if (cache.count == 0) refill(state, owner, kind, cache);
    return cache.slots[--cache.count];
  }
  handle_cache cache;
  refill(state, owner, kind, cache);
  std::atomic<void*>* slot = cache.slots[--cache.count];
  internal::return_to_blocks(state.kinds[k], cache, cache.count);
  return slot;
}

// Takes a released slot when the thread's cache of its kind is full (half of it goes back to
// the blocks), when the thread used another table last, or has no cache (exiting, or out of
// memory for its first one: straight to the block).
[[gnu::noinline]] void release_to_cache_or_block(std::uint64_t serial, internal::handle_table_state& state,
                                                 handle_kind kind, std::atomic<void*>* slot) noexcept {
  handle_kind_state& k = state.kinds[static_cast<std::size_t>(kind)];
  detail::handle_table_caches* caches = nullptr;
  try {
    caches = internal::thread_caches_slow(serial);
  } catch (...) {
    // No memory for this thread's first cache: the slot goes straight back to its block.
  }
  if (caches) {
    handle_cache& cache = caches->kinds[static_cast<std::size_t>(kind)];
    // A batch to the depot, or, when it has no container to spare, to the blocks.
    if (cache.count == handle_cache::capacity) {
      cache.may_take_any_shard = true;
      if (!k.depot->put(cache)) internal::return_to_blocks(k, cache, handle_cache::batch);
    }
    cache.slots[cache.count++] = slot;
    return;
  }
  handle_cache single;
  single.slots[single.count++] = slot;
  internal::return_to_blocks(k, single, 1);
}

}  // namespace

handle handle_table::allocate_slow(handle_kind kind, void* target, void* secondary) {
  const auto k = static_cast<std::size_t>(kind);
  if (k >= handle_kind_count) [[unlikely]]
    throw std::invalid_argument("palrt: handle_table::allocate: unknown handle kind");
  if (secondary && kind != handle_kind::dependent) [[unlikely]]
    throw std::invalid_argument("palrt: handle_table::allocate: only a dependent handle has a secondary");
  if (kind == handle_kind::dependent && state_->dependents && state_->made.forked()) [[unlikely]]
    throw pal::forked_child_error("handle_table::allocate");  // linking takes the index's lock
  std::atomic<void*>* slot;
  const detail::thread_cache_hint hint = detail::current_thread_cache;
  if (hint.serial == serial_ && hint.caches->kinds[k].count > 0) [[likely]]
    slot = hint.caches->kinds[k].slots[--hint.caches->kinds[k].count];
  else
    slot = slot_from_cache_or_block(serial_, *state_, this, kind);
  // The block young before and after the stores ("Generations", handle_table.hpp).
  const bool young = target || secondary;
  if (young) detail::mark_young(slot);
  if (auto hook = state_->age_window_hook) [[unlikely]]
    hook(state_->age_window_hook_context);
  if (kind == handle_kind::dependent) {
    handle_block* block = handle_block::of(slot);
    // relaxed: published by the release store of the target below.
    block->secondaries[block->index_of(slot)].store(secondary, std::memory_order_relaxed);
    if (state_->dependents) {
      slot->store(target, std::memory_order_release);
      // After the store: a lookup that finds the node sees its primary. Until it is linked,
      // the secondary is the caller's (an argument of this call).
      state_->dependents->link(internal::dependent_nodes(block)[block->index_of(slot)], target);
      if (young) detail::mark_young(slot);
      return handle(slot);
    }
  }
  slot->store(target, std::memory_order_release);
  if (young) detail::mark_young(slot);
  return handle(slot);
}

void* handle_table::release_slow(handle h) noexcept {
  handle_block* block = block_of(h, "release");
  void* const marker = detail::free_slot_marker();
  // A gated read of the slot, then a compare-exchange from what it read to the marker, always
  // (an atomic read-modify-write): a dependent handle's old primary decides who drops its
  // secondary (the owner, or the sweep that cleared it), so exactly one of them may see it;
  // and in checked builds two racing releases of one handle cannot both succeed (the loser
  // reads the marker again). The inline fast path (release builds, the other kinds) does a
  // load and a store instead, half the cost: a sweep racing it either clears the slot first
  // (the store overwrites its null) or fails its compare-exchange on the marker, and nobody's
  // ownership depends on the result.
  // The read is gated as gated_target()'s is, so that the target returned was in the slot
  // outside any window between a host's mark and its sweeps; a strong handle's is never
  // cleared and needs no gate, the closer reads through, and in a fork()ed child nobody opens
  // a gate that was closed at fork().
  const bool gated = block->kind != handle_kind::strong && block->kind != handle_kind::pinned;
  void* old;
  for (;;) {
    // acquire (gate): the sweeps before it opened are visible. relaxed (closer): only the
    // closing thread stores its own marker there, and a thread sees its own stores.
    const std::uint32_t g = gate_.load(std::memory_order_acquire);
    if ((g & 1) && gated && gate_closer_.load(std::memory_order_relaxed) != &gate_thread && !state_->made.forked()) {
      wait_for_gate(gate_, gate_waiters_, g);
      continue;
    }
    old = h.slot_->load(std::memory_order_acquire);
    if (old == marker) misuse("release", h.slot_, "the handle was already released");
    // relaxed: after the slot's acquire load. A close between the two looks: read again.
    if (gated && gate_.load(std::memory_order_relaxed) != g) continue;
    // acq_rel: acquire makes the target's last writer's stores visible to the caller (who may
    // act on the returned target); release orders the caller's last uses of the slot before
    // the slot's next owner. On failure (a sweep cleared the slot, or a racing release or
    // set_target changed it) the loop reads again.
    if (h.slot_->compare_exchange_strong(old, marker, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
  }
  if (block->secondaries) {
    const std::size_t i = block->index_of(h.slot_);
    block->secondaries[i].store(nullptr, std::memory_order_relaxed);
    if (state_->dependents) {
      // In a fork()ed child the index's lock may be held for good: the slot stays linked (a
      // lookup skips it: it holds the free marker) and out of circulation.
      if (state_->made.forked()) return old;
      state_->dependents->unlink(internal::dependent_nodes(block)[i]);
    }
  }
  const detail::thread_cache_hint hint = detail::current_thread_cache;
  if (hint.serial == serial_) {
    handle_cache& cache = hint.caches->kinds[static_cast<std::size_t>(block->kind)];
    if (cache.count < handle_cache::capacity) {
      cache.slots[cache.count++] = h.slot_;
      return old;
    }
  }
  release_to_cache_or_block(serial_, *state_, block->kind, h.slot_);
  return old;
}

void* handle_table::secondary(handle h) const noexcept {
  handle_block* block = block_of(h, "secondary");
  // Through the primary, as handle_slot::secondary() and gated_secondary() read: a sweep
  // clears only the primary (clearing the secondary too could not be done safely, the owner
  // may release the slot and a new handle reuse it the moment the primary is null), so the
  // secondary of a cleared handle stays in its slot, and only the primary says it is dead.
  return block->secondaries ? handle_slot(h.slot_, &block->secondaries[block->index_of(h.slot_)]).secondary() : nullptr;
}

void handle_table::set_secondary(handle h, void* secondary) const noexcept {
  handle_block* block = block_of(h, "set_secondary");
  if (!block->secondaries) misuse("set_secondary", h.slot_, "only a dependent handle has a secondary");
  if (secondary) detail::mark_young(h.slot_);
  if (auto hook = state_->age_window_hook) [[unlikely]]
    hook(state_->age_window_hook_context);
  block->secondaries[block->index_of(h.slot_)].store(secondary, std::memory_order_release);
  if (secondary) detail::mark_young(h.slot_);
}

handle_kind handle_table::kind(handle h) const noexcept { return block_of(h, "kind")->kind; }

namespace internal {
std::size_t clear_dead(handle_block* block, std::size_t i, void* target, void* on_cleared, detail::cleared_fn cleared) {
  // Read before clearing: once the primary is cleared, the owner may release the slot and
  // a new handle reuse it. The slot cannot have been reused for this same target since:
  // nobody allocates a handle to a dead object.
  void* secondary = block->secondaries ? block->secondaries[i].load(std::memory_order_acquire) : nullptr;
  void* expected = target;
  if (!block->slots[i].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed))
    return 0;  // released or retargeted meanwhile: not ours to clear
  if (cleared) cleared(on_cleared, target, secondary);
  return 1;
}
}  // namespace internal

// The table's own walks: a handle_walk of all generations, run by this thread alone.
std::size_t handle_table::sweep(handle_kind kind, void* is_alive, predicate_fn alive, void* on_cleared,
                                cleared_fn cleared) {
  return handle_walk(*this, kind).sweep_erased(is_alive, alive, on_cleared, cleared);
}

std::size_t handle_table::sweep_batched(handle_kind kind, void* is_alive, batch_fn alive, void* on_cleared,
                                        cleared_fn cleared) {
  return handle_walk(*this, kind).sweep_batched_erased(is_alive, alive, on_cleared, cleared);
}

void handle_table::visit_targets(handle_kind kind, void* visit, visit_fn fn) const {
  handle_walk(*this, kind).for_each_target_erased(visit, fn);
}

std::size_t handle_table::promote(void* is_alive, predicate_fn alive, void* mark, visit_fn fn) const {
  return handle_walk(*this, handle_kind::dependent).promote_erased(is_alive, alive, mark, fn);
}

void handle_table::visit_slots(handle_kind kind, void* visit, slot_fn fn) const {
  handle_walk(*this, kind).for_each_slot_erased(visit, fn);
}

void handle_table::age_handles(std::uint8_t condemned, std::uint8_t survivors) noexcept {
  // int: condemned + 1 of all_generations is 256, above every age.
  const int promoted = std::min<int>(survivors, condemned + 1);
  for (auto& k : state_->kinds) {
    const std::size_t n = k.directory.size();
    for (std::size_t i = 0; i < n; ++i) {
      std::atomic<std::uint8_t>& age = k.directory.age(i);
      // relaxed: with the world stopped (see block_directory.hpp).
      const std::uint8_t a = age.load(std::memory_order_relaxed);
      if (a <= condemned && a < promoted) age.store(static_cast<std::uint8_t>(promoted), std::memory_order_relaxed);
    }
  }
}

std::size_t handle_table::secondaries_of(const void* primary, void* visit, visit_fn fn) const noexcept {
  if (!state_->dependents) misuse("for_each_secondary_of", primary, "the table was not made with index_dependents");
  if (!primary) return 0;
  return state_->dependents->for_each_secondary_of(primary, visit, fn);
}

void handle_table::close_tracking_reads() noexcept {
  const std::uint32_t g = gate_.load(std::memory_order_relaxed);
  if (g & 1) misuse("close_tracking_reads", nullptr, "the gate is closed already (two collections at once?)");
  gate_closer_.store(&gate_thread, std::memory_order_relaxed);
  // seq_cst: a reader's gate loads around its slot read see this before any sweep's clear.
  gate_.store(g + 1, std::memory_order_seq_cst);
}

void handle_table::open_tracking_reads() noexcept {
  const std::uint32_t g = gate_.load(std::memory_order_relaxed);
  if (!(g & 1)) misuse("open_tracking_reads", nullptr, "the gate is not closed");
  gate_closer_.store(nullptr, std::memory_order_relaxed);
  // seq_cst, then the waiters' count: a waiter counts itself (seq_cst) before its last look at
  // the gate, so either it sees the gate open or this sees it waiting, and wakes it.
  // release (in seq_cst): the sweeps before are visible to a reader that sees the gate open.
  gate_.store(g + 1, std::memory_order_seq_cst);
  if (gate_waiters_.load(std::memory_order_seq_cst) > 0) pal::internal::futex_wake(gate_, INT32_MAX);
}

void* handle_table::gated_read_slow(const std::atomic<void*>& slot, const std::atomic<void*>* primary) const noexcept {
  void* const marker = detail::free_slot_marker();
  auto read = [&]() -> void* {
    if (primary) {
      void* p = primary->load(std::memory_order_acquire);
      if (!p || p == marker) return nullptr;
    }
    return slot.load(std::memory_order_acquire);
  };
  for (;;) {
    const std::uint32_t g = gate_.load(std::memory_order_acquire);
    if (g & 1) {
      if (gate_closer_.load(std::memory_order_relaxed) == &gate_thread) return read();
      wait_for_gate(gate_, gate_waiters_, g);
      continue;
    }
    void* t = read();
    if (auto hook = state_->gated_read_hook) [[unlikely]]
      hook(state_->gated_read_hook_context);
    // acquire loads above: this load comes after them.
    if (gate_.load(std::memory_order_relaxed) == g) return t;
  }
}

void* handle_table::gated_secondary(handle h) const noexcept {
  handle_block* block = block_of(h, "gated_secondary");
  return block->secondaries ? gated_read_slow(block->secondaries[block->index_of(h.slot_)], h.slot_) : nullptr;
}

handle_counters handle_table::counters() const {
  handle_counters c;
  void* const marker = detail::free_slot_marker();
  // The chunks the blocks are carved from (the last one's blocks not carved yet included:
  // at most 63 KiB), each dependent block's side area (secondaries, index nodes, promotion
  // links), the index, the promotions' buckets, the directories, the depots, and in checked
  // builds the set of blocks.
  c.bytes = state_->chunks.bytes() + state_->all_blocks.bytes() + state_->promotion.bytes();
  for (std::size_t k = 0; k < handle_kind_count; ++k) {
    const handle_kind_state& state = state_->kinds[k];
    const std::size_t blocks = state.block_count.load(std::memory_order_relaxed);
    c.blocks += blocks;
    if (k == static_cast<std::size_t>(handle_kind::dependent))
      c.bytes += blocks * internal::dependent_side_bytes(state_->dependents != nullptr);
    c.bytes += state.directory.bytes() + state.depot->bytes();
    for_each_used_slot(state, [&](handle_block* block, std::size_t i) {
      if (block->slots[i].load(std::memory_order_relaxed) != marker) ++c.handles[k];
    });
  }
  if (state_->dependents) c.bytes += state_->dependents->bytes();
  return c;
}

}  // namespace palrt::gc

namespace palrt::gc::internal {

void handle_table_access::fail_block_allocations(handle_table& table, int n) noexcept {
  table.state_->failing_allocations.store(n, std::memory_order_relaxed);
}

void handle_table_access::fail_secondaries_allocations(handle_table& table, int n) noexcept {
  table.state_->failing_secondaries.store(n, std::memory_order_relaxed);
}

std::size_t handle_table_access::cached_free_slots(const handle_table& table, handle_kind kind) {
  handle_table_caches* caches = thread_caches_slow(table.serial_);
  return caches ? caches->kinds[static_cast<std::size_t>(kind)].count : 0;
}

std::vector<const void*> handle_table_access::cached_slots(const handle_table& table, handle_kind kind) {
  handle_table_caches* caches = thread_caches_slow(table.serial_);
  if (!caches) return {};
  const handle_cache& cache = caches->kinds[static_cast<std::size_t>(kind)];
  return std::vector<const void*>(cache.slots, cache.slots + cache.count);  // (not a list of two)
}

std::size_t handle_table_access::slots_per_block() noexcept { return handle_block_slots; }

std::unique_lock<std::mutex> handle_table_access::hold_all_blocks_lock(handle_table& table) {
  return std::unique_lock(table.state_->all_blocks_lock);
}

std::uint32_t handle_table_access::gate_waiters(const handle_table& table) noexcept {
  return table.gate_waiters_.load(std::memory_order_seq_cst);
}

void handle_table_access::set_slot_walk_hook(handle_table& table, void (*hook)(void*), void* context) noexcept {
  table.state_->slot_walk_hook_context = context;
  table.state_->slot_walk_hook = hook;
}

void handle_table_access::set_age_window_hook(handle_table& table, void (*hook)(void*), void* context) noexcept {
  table.state_->age_window_hook_context = context;
  table.state_->age_window_hook = hook;
}

std::uint8_t handle_table_access::block_age(handle h) noexcept {
  return handle_block::of(h.slot_)->age->load(std::memory_order_relaxed);
}

void handle_table_access::set_gated_read_hook(handle_table& table, void (*hook)(void*), void* context) noexcept {
  table.state_->gated_read_hook_context = context;
  table.state_->gated_read_hook = hook;
}

std::unique_lock<std::mutex> handle_table_access::hold_kind_lock(handle_table& table, handle_kind kind) {
  return std::unique_lock(table.state_->kinds[static_cast<std::size_t>(kind)].lock);
}

void handle_table_access::set_dependent_traversal_hook(handle_table& table, void (*hook)(void*),
                                                       void* context) noexcept {
  table.state_->dependents->traversal_hook_context = context;
  table.state_->dependents->traversal_hook = hook;
}

std::size_t handle_table_access::dependent_index_buckets(const handle_table& table) noexcept {
  return table.state_->dependents->bucket_count();
}

std::size_t handle_table_access::dependent_index_bucket(const handle_table& table, const void* primary) noexcept {
  return table.state_->dependents->bucket_index(primary);
}

std::unique_lock<std::mutex> handle_table_access::hold_dependent_index_lock(handle_table& table) {
  return table.state_->dependents->hold_lock();
}

void handle_table_access::use_depot(handle_table& table, handle_kind kind, std::size_t shards,
                                    std::size_t max_batches) {
  table.state_->kinds[static_cast<std::size_t>(kind)].depot = std::make_unique<batch_depot>(shards, max_batches);
}

std::size_t handle_table_access::depot_shards(const handle_table& table, handle_kind kind) noexcept {
  return table.state_->kinds[static_cast<std::size_t>(kind)].depot->shard_count();
}

std::size_t handle_table_access::depot_capacity(const handle_table& table, handle_kind kind) noexcept {
  return table.state_->kinds[static_cast<std::size_t>(kind)].depot->max_batches();
}

std::size_t handle_table_access::depot_full_batches(const handle_table& table, handle_kind kind, int shard) noexcept {
  return table.state_->kinds[static_cast<std::size_t>(kind)].depot->full_batches(shard);
}

void handle_table_access::set_depot_home_shard(int shard) noexcept { batch_depot::force_home_shard(shard); }

std::size_t handle_table_access::depot_containers(const handle_table& table, handle_kind kind) noexcept {
  return table.state_->kinds[static_cast<std::size_t>(kind)].depot->containers();
}

void handle_table_access::set_block_run(int run) noexcept { block_chunks::force_run(run); }

void handle_table_access::set_depot_pop_hook(handle_table& table, handle_kind kind, void (*hook)(void*),
                                             void* context) noexcept {
  batch_depot& depot = *table.state_->kinds[static_cast<std::size_t>(kind)].depot;
  if (hook) depot.pop_hook_context = context;             // clearing leaves it for a caller inside the hook
  depot.pop_hook.store(hook, std::memory_order_release);  // release: the context before the hook
}

void handle_table_access::set_depot_transit_hook(handle_table& table, handle_kind kind, void (*hook)(void*),
                                                 void* context) noexcept {
  batch_depot& depot = *table.state_->kinds[static_cast<std::size_t>(kind)].depot;
  if (hook) depot.transit_hook_context = context;             // clearing leaves it for a caller inside the hook
  depot.transit_hook.store(hook, std::memory_order_release);  // release: the context before the hook
}

}  // namespace palrt::gc::internal

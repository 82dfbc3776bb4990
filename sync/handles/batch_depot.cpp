// SPDX-License-Identifier: MIT
// The handle table's depot of free slots in batches (internal/batch_depot.hpp says what it
// is for and how the table uses it).
//
// Protocol. A container (a `batch`) is, at any time, in exactly one of three places: on one
// shard's stack of full batches (it names batch_slots free slots), on one shard's stack of
// empty containers, or held by the one thread inside take() or put() that popped it (or made
// it). Only the holder writes its `slots`; `next` is written only by a thread about to push it.
// Each stack is a Treiber stack of container indexes whose head is one 64-bit word,
// tag << 32 | index of the top, so that each move of a batch is one compare-exchange:
//   push  (P)  store the container's next = the top read, then compare-exchange the head to
//              (tag + 1, container), release;
//   pop   (P') load the head (H', acquire), read the top's next (N, relaxed), compare-exchange
//              the head to (tag + 1, next), acquire; on success the thread holds the top.
// take(): pop a full batch (home shard, then, for a cache that may take from any, the others),
// copy its slots into the cache, push the container onto the home shard's empty stack.
// take_left_by(): the same from a shard whose last putter was the exiting thread's cache.
// put(): pop an empty container (home, else make some there, else the other shards'), copy the
// cache's oldest slots into it, push it full.
//
// Why the slots a taker gets are free and its own: P (release) by the putter pairs with P'
// (acquire) by the taker; every later compare-exchange on the head is a read-modify-write, so
// it continues P's release sequence and a pop that reads any later head value still
// synchronises with P. So the taker sees the container's slots as the putter wrote them, and
// everything that happened before in the putter's thread: the free markers its releases
// stored, and, through the cache, every earlier owner's use of those slots. The taker's
// stores of new targets come after all of that. In the other direction, a taker has copied a
// container's slots out before its P pushes it empty, and the next putter pops it with P', so
// the putter's writes come after the taker's reads.
//
// Why a pop cannot take a container twice (ABA). N may read a container that another thread
// popped meanwhile; its next is stale then. The compare-exchange fails in that case because
// the tag moved: every successful compare-exchange adds one to it, so the head holds the value
// the pop loaded only if no push or pop happened since, and then the top's next is the one its
// last pusher stored (which H' synchronised with, as above). Without the tag, a pop that loaded
// top i with next j, stalled while others popped i and j and pushed i back on top of another
// batch, would install j as the top although j is held elsewhere: its slots would be handed
// out twice. The tag is 32 bits: the same value comes back only after 2^32 operations on one
// head while one pop stalls between its load and its compare-exchange. (The table's tests
// force the stalled pop: handle_table_access::set_depot_pop_hook.) Containers are never freed
// while the depot lives, so N, even stale, reads memory that is a container.
//
// Containers are made in chunks (chunk k holds first_chunk << k, indexes first_chunk*(2^k-1)
// on), lock-free: the maker constructs a chunk, installs its address in chunks_[k] with a
// compare-exchange (release, C; at() loads it with acquire, C'), keeps one container and
// pushes the rest as one chain onto its home shard's empty stack. A maker that loses the
// install frees its chunk and looks for a container again (put()); only when no chunk may be
// made does put() fail, and its caller falls back to the blocks, which is always correct. An
// index reaches a stack only by a push that follows its chunk's C in the maker's order, so
// at() on any index read from a head (acquire) finds the chunk.
//
// Shards. They are made by the first put() (shards(): allocated, initialised, installed with
// one compare-exchange, release, S; every use loads them with acquire, S'; a loser frees its
// own), so every stack a thread reaches is initialised; before that, take() finds nothing,
// which is the truth. The home shard is the CPU the thread runs on (pal::current_cpu(),
// masked): a hint for locality only. Every stack above is correct for any thread, so a thread that moved CPUs
// between its pop and its push, or two CPUs that share a shard, cost a shared line, not
// correctness.
//
// What the rest of the table relies on: moving slots through the depot changes no block bit
// and no slot value, so a sweep, iteration or counters() running meanwhile sees those slots as
// it sees a thread's cache (bit set, free marker: skipped). A stopped thread (world stopped,
// or a parent's thread absent in a fork()ed child) holds at most one container; its slots stay
// out of circulation, never counted as handles, and every stack stays well-formed (each change
// is one compare-exchange).
#include "palrt/gc/internal/batch_depot.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "palrt/pal/cpu.hpp"

namespace palrt::gc::internal {

namespace {

constexpr std::uint32_t index_of(std::uint64_t head) noexcept { return static_cast<std::uint32_t>(head); }
constexpr std::uint64_t next_head(std::uint64_t head, std::uint32_t index) noexcept {
  return ((head >> 32) + 1) << 32 | index;
}

// Tests pin a thread's home shard (handle_table_access::set_depot_home_shard); -1: its CPU.
constinit thread_local int forced_home_shard = -1;

}  // namespace

batch_depot::batch_depot(std::size_t shards, std::size_t max_batches)
    : wanted_shards_(shards), wanted_max_batches_(max_batches) {}

const batch_depot::shard_set* batch_depot::shards() noexcept {
  // acquire (S'): pairs with S below (the set is initialised).
  if (const shard_set* set = shards_.load(std::memory_order_acquire)) [[likely]]
    return set;
  const std::size_t bound = wanted_shards_ ? wanted_shards_ : static_cast<std::size_t>(pal::cpu_id_bound());
  const std::size_t count = std::bit_ceil(std::max<std::size_t>(1, std::min(bound, max_shards)));
  auto* set = new (std::nothrow) shard_set;
  if (!set) return nullptr;
  set->shards.reset(new (std::nothrow) shard[count]);
  if (!set->shards) {
    delete set;
    return nullptr;
  }
  set->mask = count - 1;
  // Whole chunks: the bound is exact.
  const std::size_t wanted = wanted_max_batches_ ? wanted_max_batches_ : 8 * count;
  std::size_t cap = first_chunk;
  for (int k = 1; k < max_chunks && cap < wanted; ++k) cap += std::size_t{first_chunk} << k;
  set->max_batches = cap;
  for (std::size_t i = 0; i < count; ++i) {
    // relaxed: published by S.
    set->shards[i].full.store(no_batch, std::memory_order_relaxed);
    set->shards[i].empty.store(no_batch, std::memory_order_relaxed);
  }
  shard_set* expected = nullptr;
  // S (release): the set is initialised before anyone finds it.
  if (shards_.compare_exchange_strong(expected, set, std::memory_order_release, std::memory_order_acquire)) return set;
  delete set;  // another thread installed one first: use it
  return expected;
}

batch_depot::~batch_depot() {
  // relaxed: the depot's owner destroys it after every other user is done.
  delete shards_.load(std::memory_order_relaxed);
  for (int k = 0; k < max_chunks; ++k) {
    // relaxed: the depot's owner destroys it after every other user is done.
    batch* chunk = chunks_[k].load(std::memory_order_relaxed);
    if (!chunk) break;
    ::operator delete[](chunk, std::align_val_t{alignof(batch)});
  }
}

batch_depot::batch& batch_depot::at(std::uint32_t index) const noexcept {
  const std::uint64_t shifted = std::uint64_t{index} + first_chunk;
  const int k = static_cast<int>(std::bit_width(shifted)) - static_cast<int>(std::bit_width(first_chunk));
  // C': acquire, pairs with C in make_containers (the chunk's containers are constructed).
  batch* chunk = chunks_[k].load(std::memory_order_acquire);
  return chunk[shifted - (std::uint64_t{first_chunk} << k)];
}

batch_depot::batch* batch_depot::pop(std::atomic<std::uint64_t>& head) noexcept {
  // H' (acquire): synchronises with the push that put the top there (see the top of the file).
  std::uint64_t h = head.load(std::memory_order_acquire);
  while (index_of(h) != no_batch) {
    batch& top = at(index_of(h));
    // N, relaxed: a stale next means the top moved, and the tag makes the exchange fail.
    const std::uint32_t next = top.next.load(std::memory_order_relaxed);
    // acquire: the hook's context, stored before it (tests only).
    if (auto hook = pop_hook.load(std::memory_order_acquire)) [[unlikely]]
      hook(pop_hook_context);
    // P' (acquire on both outcomes: on failure h is reloaded, as H').
    if (head.compare_exchange_weak(h, next_head(h, next), std::memory_order_acquire, std::memory_order_acquire))
      return &top;
  }
  return nullptr;
}

void batch_depot::push(std::atomic<std::uint64_t>& head, batch& first, batch& last) noexcept {
  std::uint64_t h = head.load(std::memory_order_relaxed);  // relaxed: checked by the exchange
  do {
    // relaxed: published by the exchange's release.
    last.next.store(index_of(h), std::memory_order_relaxed);
    // P (release): the container's slots, and all this thread did before, to its next popper.
  } while (
      !head.compare_exchange_weak(h, next_head(h, first.index), std::memory_order_release, std::memory_order_relaxed));
}

std::size_t batch_depot::home_shard(const shard_set& set) noexcept {
  const int forced = forced_home_shard;
  return static_cast<std::size_t>(forced >= 0 ? forced : pal::current_cpu()) & set.mask;
}

batch_depot::batch* batch_depot::pop_any(const shard_set& set, std::atomic<std::uint64_t> shard::*stack,
                                         std::size_t home) noexcept {
  for (std::size_t i = 0; i <= set.mask; ++i) {
    if (batch* b = pop(set.shards[(home + i) & set.mask].*stack)) return b;
  }
  return nullptr;
}

batch_depot::made batch_depot::make_containers(const shard_set& set, shard& home, batch*& kept) noexcept {
  int k = 0;
  std::uint32_t first = 0;
  // acquire (C'): only to find the first chunk not made yet; the exchange below decides.
  while (k < max_chunks && chunks_[k].load(std::memory_order_acquire)) first += first_chunk << k++;
  if (k == max_chunks || first >= set.max_batches) return made::none;
  const std::uint32_t size = first_chunk << k;
  void* memory = ::operator new[](size * sizeof(batch), std::align_val_t{alignof(batch)}, std::nothrow);
  if (!memory) return made::none;
  batch* chunk = static_cast<batch*>(memory);
  for (std::uint32_t i = 0; i < size; ++i) {
    batch* b = ::new (static_cast<void*>(chunk + i)) batch;
    b->index = first + i;
    // relaxed: published by C, and by the push below for the chain.
    b->next.store(i + 1 < size ? first + i + 1 : no_batch, std::memory_order_relaxed);
  }
  batch* expected = nullptr;
  // C (release): the containers are constructed before anyone can find the chunk.
  if (!chunks_[k].compare_exchange_strong(expected, chunk, std::memory_order_release, std::memory_order_relaxed)) {
    ::operator delete[](memory, std::align_val_t{alignof(batch)});
    return made::by_another;  // another maker won chunk k: its containers are on a shard now
  }
  made_.fetch_add(size, std::memory_order_relaxed);  // relaxed: a statistic
  if (size > 1) push(home.empty, chunk[1], chunk[size - 1]);
  kept = &chunk[0];
  return made::here;
}

bool batch_depot::put(detail::handle_cache& cache) noexcept {
  const shard_set* set = shards();
  if (!set) return false;
  const std::size_t home = home_shard(*set);
  batch* b = nullptr;
  // A container from this shard, else a chunk made for it, and another shard's spare only
  // when no more may be made: containers of one chunk lie side by side, and one that another
  // CPU's thread fills and empties beside this thread's costs line transfers on every burst
  // (the prefetchers that read on past the end of a container's slots pull the first lines of
  // the next one: docs/BENCHMARKS.md). The bound is the same: max_batches containers.
  // A maker that lost the race for a chunk looks again rather than send the slots back to the
  // blocks (where the next refill would mix them with another thread's): the winner pushes
  // its spare containers right after its install, and if they are not there yet, or taken,
  // the next round makes the next chunk. Bounded: every round, one more chunk exists.
  for (;;) {
    if ((b = pop(set->shards[home].empty))) break;
    const made m = make_containers(*set, set->shards[home], b);
    if (m == made::here) break;
    if (m == made::none) {
      if ((b = pop_any(*set, &shard::empty, home))) break;
      return false;
    }
  }
  std::memcpy(b->slots, cache.slots, sizeof b->slots);
  // acquire: as for pop_hook (tests only).
  if (auto hook = transit_hook.load(std::memory_order_acquire)) [[unlikely]]
    hook(transit_hook_context);
  std::memmove(cache.slots, cache.slots + batch_slots, (cache.count - batch_slots) * sizeof(cache.slots[0]));
  cache.count -= batch_slots;
  set->shards[home].last_putter.store(&cache, std::memory_order_relaxed);
  push(set->shards[home].full, *b, *b);
  return true;
}

void batch_depot::take_into(batch& full, shard& home, detail::handle_cache& cache) noexcept {
  // acquire: as for pop_hook (tests only).
  if (auto hook = transit_hook.load(std::memory_order_acquire)) [[unlikely]]
    hook(transit_hook_context);
  std::memcpy(cache.slots + cache.count, full.slots, sizeof full.slots);
  cache.count += batch_slots;
  push(home.empty, full, full);
}

bool batch_depot::take(detail::handle_cache& cache) noexcept {
  // acquire (S'): no set yet, no batch was ever put.
  const shard_set* set = shards_.load(std::memory_order_acquire);
  if (!set) return false;
  const std::size_t home = home_shard(*set);
  if (!cache.may_take_any_shard && cache.block_refills >= set->max_batches) cache.may_take_any_shard = true;
  batch* b = cache.may_take_any_shard ? pop_any(*set, &shard::full, home) : pop(set->shards[home].full);
  if (!b) return false;
  take_into(*b, set->shards[home], cache);
  return true;
}

bool batch_depot::take_left_by(const detail::handle_cache* putter, detail::handle_cache& into) noexcept {
  const shard_set* set = shards_.load(std::memory_order_acquire);  // S'
  if (!set) return false;
  for (std::size_t s = 0; s <= set->mask; ++s) {
    if (set->shards[s].last_putter.load(std::memory_order_relaxed) != putter) continue;
    if (batch* b = pop(set->shards[s].full)) {
      take_into(*b, set->shards[s], into);
      return true;
    }
  }
  return false;
}

void batch_depot::force_home_shard(int shard) noexcept { forced_home_shard = shard; }

std::size_t batch_depot::full_batches(int only_shard) const noexcept {
  const shard_set* set = shards_.load(std::memory_order_acquire);  // S'
  if (!set) return 0;
  std::size_t n = 0;
  for (std::size_t s = 0; s <= set->mask; ++s) {
    if (only_shard >= 0 && s != static_cast<std::size_t>(only_shard)) continue;
    // relaxed: no other thread uses the depot meanwhile (the caller's precondition).
    for (std::uint32_t i = index_of(set->shards[s].full.load(std::memory_order_relaxed)); i != no_batch;
         i = at(i).next.load(std::memory_order_relaxed))
      ++n;
  }
  return n;
}

std::size_t batch_depot::shard_count() noexcept {
  const shard_set* set = shards();
  return set ? set->mask + 1 : 0;
}

std::size_t batch_depot::max_batches() noexcept {
  const shard_set* set = shards();
  return set ? set->max_batches : 0;
}

std::size_t batch_depot::bytes() const noexcept {
  // acquire (S'); relaxed for the count: a statistic (counters() is a snapshot).
  const shard_set* set = shards_.load(std::memory_order_acquire);
  return made_.load(std::memory_order_relaxed) * sizeof(batch) +
         (set ? sizeof(shard_set) + (set->mask + 1) * sizeof(shard) : 0);
}

}  // namespace palrt::gc::internal

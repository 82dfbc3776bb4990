// SPDX-License-Identifier: MIT
// The handle table's depot of free slots in batches: where a thread's cache of one kind
// returns a batch of free slots when it is full, and refills a batch from when it is empty,
// with one compare-exchange each way and no lock, so that threads whose working sets exceed
// their caches do not serialize on the kind's lock. One depot per table and kind.
//
// A batch is a container of handle_cache::batch slot addresses; the slots it names are free
// (they hold the free marker) and stay handed out of their blocks (their bits set), exactly
// like the slots of a thread's cache: sweeps, iteration and counters, which walk the blocks'
// bits and skip the marker, never look at the depot and need nothing from it. Moving slots
// into or out of the depot changes no bit and no slot.
//
// The depot is split into per-CPU shards (each a stack of full batches and a stack of empty
// containers), so that a thread returns and refills on the shard of the CPU it runs on and,
// in the steady state, gets its own slots back, warm in its own cache, touching no line
// another CPU writes. The CPU is a hint: a thread may run anywhere by the time it pushes, and
// every shard is correct for any thread (batch_depot.cpp states the protocol). An empty shard
// steals from the others before the caller falls back to the blocks.
//
// Bounded: containers are made in chunks, lock-free, up to `max_batches`; when none is free
// the caller returns the slots to their blocks instead (clearing their bits, lock-free), as
// it did before the depot. So at most max_batches * batch free slots sit in the depot, which
// bounds what a sweep reads beyond the live handles (their markers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "palrt/gc/detail/handle_fast_path.hpp"

namespace palrt::gc::internal {

class handle_table_access;

class batch_depot {
 public:
  static constexpr std::uint32_t batch_slots = detail::handle_cache::batch;

  // `shards`: rounded up to a power of two, at most max_shards. `max_batches`: the containers
  // it may make, at least one chunk's worth.
  batch_depot(std::size_t shards, std::size_t max_batches);
  ~batch_depot();
  batch_depot(const batch_depot&) = delete;
  batch_depot& operator=(const batch_depot&) = delete;

  // Moves the oldest batch_slots slots of `cache` (cache.count >= batch_slots) into a full
  // batch on this CPU's shard. false, the cache unchanged, when no container is free and no
  // more may be made (or memory for one is short): the caller returns the slots elsewhere.
  // Lock-free; allocates (malloc) when it makes containers.
  bool put(detail::handle_cache& cache) noexcept;
  // Moves one full batch, this CPU's shard first, into `cache` (room for batch_slots). false
  // when every shard is empty. Lock-free, no allocation.
  bool take(detail::handle_cache& cache) noexcept;

  std::size_t bytes() const noexcept;  // containers made, and the shards
  std::size_t shard_count() const noexcept { return shard_mask_ + 1; }
  std::size_t max_batches() const noexcept { return max_batches_; }

  static constexpr std::size_t max_shards = 64;

 private:
  friend class handle_table_access;

  // 128-byte aligned for the same reason as the shards below: two batches held by two CPUs
  // would otherwise share a pair of lines where one ends and the next begins.
  struct alignas(128) batch {
    std::atomic<std::uint32_t> next{0};  // the batch below it on its stack (no_batch: none)
    std::uint32_t index = 0;             // its own index (fixed)
    std::atomic<void*>* slots[batch_slots];
  };
  // One cache line per shard: its two stack heads, each (tag << 32 | index of the top).
  // 128 bytes apart, not 64: x86's spatial prefetchers pull lines in pairs, so two CPUs'
  // shards on the two halves of one pair would trade the pair on every move (two threads,
  // 1024 allocate + release pairs each per round on one table: 4.5-6.5 ns per pair
  // aggregate with the shards 64 bytes apart, 3.1-3.6 with 128, on a 2-vCPU VM).
  struct alignas(128) shard {
    std::atomic<std::uint64_t> full;
    std::atomic<std::uint64_t> empty;
  };
  static constexpr std::uint32_t no_batch = 0xffffffffu;
  static constexpr std::uint32_t first_chunk = 8;  // chunk k holds first_chunk << k batches
  static constexpr int max_chunks = 16;

  // Tests: the calling thread's home shard in every depot (-1: its CPU's, as normally).
  static void force_home_shard(int shard) noexcept;
  // Tests, with no thread using the depot: full batches on all shards.
  std::size_t full_batches() const noexcept;

  batch& at(std::uint32_t index) const noexcept;
  batch* pop(std::atomic<std::uint64_t>& head) noexcept;
  void push(std::atomic<std::uint64_t>& head, batch& first, batch& last) noexcept;
  batch* pop_any(std::atomic<std::uint64_t> shard::*stack, std::size_t home) noexcept;
  batch* make_containers(shard& home) noexcept;
  std::size_t home_shard() const noexcept;

  std::unique_ptr<shard[]> shards_;
  std::size_t shard_mask_;
  std::size_t max_batches_;
  std::atomic<batch*> chunks_[max_chunks] = {};
  std::atomic<std::size_t> made_{0};  // containers made (relaxed: a bound and a statistic)

  // Test hooks (handle_table_access), called on the slow path when set; the context is set
  // before its hook (release), and the hook loaded with acquire. `pop_hook` runs in a pop
  // after it read the top's next, before its compare-exchange; `transit_hook` while take()
  // or put() holds a batch that is on no stack.
  std::atomic<void (*)(void*)> pop_hook{nullptr};
  void* pop_hook_context = nullptr;
  std::atomic<void (*)(void*)> transit_hook{nullptr};
  void* transit_hook_context = nullptr;
};

}  // namespace palrt::gc::internal

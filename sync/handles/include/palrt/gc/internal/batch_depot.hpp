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
// steals from the others before the caller falls back to the blocks, but only for a cache
// that has overflowed, or refilled from the blocks max_batches times, before; and a thread
// that exits gives the batches it left back to the blocks (take() and take_left_by() say
// why).
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

  // `shards`: rounded up to a power of two, at most max_shards; 0: one per CPU id
  // (pal::cpu_id_bound(), process-wide, whatever the mask of the thread that makes the table).
  // `max_batches`: the containers it may make, rounded up to whole chunks; 0: 8 per shard.
  // Nothing is allocated, and no CPU count read, until the first put(): a table that never
  // overflows a cache (the one bootstrap() makes) costs neither, and the sysfs read that
  // cpu_id_bound() makes once per process stays off the startup path.
  explicit batch_depot(std::size_t shards = 0, std::size_t max_batches = 0);
  ~batch_depot();
  batch_depot(const batch_depot&) = delete;
  batch_depot& operator=(const batch_depot&) = delete;

  // Moves the oldest batch_slots slots of `cache` (cache.count >= batch_slots) into a full
  // batch on this CPU's shard. false, the cache unchanged, when no container is free and no
  // more may be made (or memory for one is short): the caller returns the slots elsewhere.
  // Lock-free; allocates (malloc) when it makes containers.
  bool put(detail::handle_cache& cache) noexcept;
  // Moves one full batch into `cache` (room for batch_slots): from this CPU's shard, or, if
  // that is empty and cache.may_take_any_shard, from another shard. false when none of those
  // has one. Lock-free, no allocation.
  //
  // Why a cache that never overflowed does not steal: it belongs to a thread still growing
  // its working set, and the batches on another CPU's shard are most likely the working set of
  // the thread running there, parked between its bursts. Taking one would put the two threads'
  // slots side by side in the same blocks for good (each thread then recycles its own set),
  // and every pair of 128-byte lines they share moves between the CPUs on every burst: two
  // threads cycling 1024 handles each ran at 2.6-2.7 ns per pair (aggregate) without a steal,
  // and at 3.8-4.3 after 1-4 steals while the second thread started. Such a thread takes
  // free slots from the blocks instead, growing the table when they have none. After as many
  // refills from the blocks as the depot holds batches it takes from any shard too: a
  // thread that only allocates, while another releases what it allocated, must not grow the
  // table forever beside the releaser's batches. So the table grows by at most about the
  // batches the depot holds (max_batches * batch_slots slots) per such thread.
  bool take(detail::handle_cache& cache) noexcept;
  // For a thread that exits, its cache `putter` returned to the blocks: moves one full batch
  // from a shard whose last put() came from `putter` into `into` (room for batch_slots), for
  // the caller to return to the blocks. false when no such shard holds one. Without this,
  // a thread's parked batches would be out of reach of threads that never overflowed (take())
  // on other CPUs. A batch another thread pushed there since may go too: it costs that thread
  // a refill from the blocks, not a slot. Lock-free, no allocation.
  bool take_left_by(const detail::handle_cache* putter, detail::handle_cache& into) noexcept;

  std::size_t bytes() const noexcept;  // containers made, and the shards
  // Both decide the shards if no put() did yet (allocating them); 0 when memory is short.
  std::size_t shard_count() noexcept;
  std::size_t max_batches() noexcept;

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
    // The cache whose put() pushed here last (an identity, never dereferenced); relaxed: a
    // hint for take_left_by, which is correct whatever it reads.
    std::atomic<const detail::handle_cache*> last_putter{nullptr};
  };
  // The shards and the bound that goes with their count, made together on first use
  // (shards()) and installed with one compare-exchange; never replaced while the depot lives.
  struct shard_set {
    std::size_t mask = 0;         // shards - 1 (a power of two)
    std::size_t max_batches = 0;  // containers it may make (whole chunks)
    std::unique_ptr<shard[]> shards;
  };
  enum class made { here, by_another, none };
  static constexpr std::uint32_t no_batch = 0xffffffffu;
  static constexpr std::uint32_t first_chunk = 8;  // chunk k holds first_chunk << k batches
  static constexpr int max_chunks = 16;

  // Tests: the calling thread's home shard in every depot (-1: its CPU's, as normally).
  static void force_home_shard(int shard) noexcept;
  // Tests: the containers made (relaxed: with no thread using the depot).
  std::size_t containers() const noexcept { return made_.load(std::memory_order_relaxed); }
  // Tests, with no thread using the depot: full batches on all shards (-1) or on one.
  std::size_t full_batches(int only_shard = -1) const noexcept;

  batch& at(std::uint32_t index) const noexcept;
  batch* pop(std::atomic<std::uint64_t>& head) noexcept;
  void push(std::atomic<std::uint64_t>& head, batch& first, batch& last) noexcept;
  batch* pop_any(const shard_set& set, std::atomic<std::uint64_t> shard::*stack, std::size_t home) noexcept;
  void take_into(batch& full, shard& home, detail::handle_cache& cache) noexcept;
  // Makes the next chunk; `here`: `kept` is one of its containers, the rest are on `home`'s
  // empty stack; `by_another`: another thread made that chunk first; `none`: no more may be
  // made, or no memory.
  made make_containers(const shard_set& set, shard& home, batch*& kept) noexcept;
  static std::size_t home_shard(const shard_set& set) noexcept;
  const shard_set* shards() noexcept;  // made on first use; null when memory is short

  const std::size_t wanted_shards_;       // 0: by the CPU ids
  const std::size_t wanted_max_batches_;  // 0: 8 per shard
  std::atomic<shard_set*> shards_{nullptr};
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

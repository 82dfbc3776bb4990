// SPDX-License-Identifier: MIT
// Where a table's blocks come from: chunks of several blocks, each chunk aligned to a page,
// carved into blocks in turn, in a run of its own for each CPU.
//
// A block must be aligned to its size (a handle finds its block by masking its address).
// Allocated one by one, aligned_alloc(1024, 1024) cost glibc about twice that (it takes size +
// alignment and the leftovers are too small for the next block): a table of 1e7 handles took
// 17.1 bytes of memory per handle while counters().bytes said 8.5. A chunk costs its size and
// at most one page's alignment (runs, below). The first chunk holds 4 blocks (a table with a handle of each
// kind takes 4 KiB), each later one as many as the table has carved so far, up to 64 (64 KiB:
// a block of 120 handles at a time still touches only the memory it uses, and the part of the
// last chunk not carved yet is at most 63 KiB, untouched).
//
// Blocks are carved in runs, one run per CPU (the CPU the carving thread runs on, a hint like
// the depot's shards), each run one 4 KiB page: so blocks that threads on two CPUs carve
// never share a page. Two threads that each grow into blocks carved one after the other
// (their first refills racing for the kind's lock) used to get blocks side by side, and the
// hardware prefetchers, which read on along a stream of lines up to the end of its page, pull
// the first lines of the neighbour's block whenever a thread's own lines had to be fetched
// again: its owner then pays a line transfer for its next store there. Two threads cycling
// 1024 handles each, their blocks carved alternately (a line transfer ~230 ns, other
// processes busy beside them): 3.17 ns per pair (aggregate, CPU clocks, median of 12) against
// 2.54 with each thread's blocks together; carved in runs, 2.63 (docs/BENCHMARKS.md). Chunks
// are aligned to the page and a whole number of pages, so no run shares its page with another
// chunk. A run holds at most 3 blocks not carved yet: at most 3 KiB more untouched memory per
// CPU that carved, beside the current chunk's rest.
//
// The table never frees a block while it lives; the chunks are freed together with the table.
// A block carved for a growth that then failed (its secondaries could not be allocated) is
// given back and carved again first.
//
// Locks: its own, taken by carve() and give_back() only, which run in a refill (under a kind's
// lock, never with the world stopped, never in a fork()ed child). bytes() takes none.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace palrt::gc::internal {

class block_chunks {
 public:
  block_chunks() = default;
  block_chunks(const block_chunks&) = delete;
  block_chunks& operator=(const block_chunks&) = delete;
  ~block_chunks();  // frees every chunk: no block may be in use

  // The memory of one block (handle_block_bytes, aligned to them, not initialised), or null
  // when no chunk can be allocated (nothing changed then).
  void* carve() noexcept;
  // A block carve() returned and nobody uses: carved again before any new one.
  void give_back(void* block) noexcept;

  // The memory of the chunks, carved or not (relaxed: a statistic, written under the lock).
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

  static constexpr std::size_t first_chunk_blocks = 4;
  static constexpr std::size_t max_chunk_blocks = 64;
  // What a run and a chunk are aligned to: the page, past which no x86 prefetcher reads.
  static constexpr std::size_t run_bytes = 4096;
  // Runs, by CPU id modulo this: CPUs whose ids differ by a multiple share one (a shared
  // page then costs what it cost before runs, nothing more).
  static constexpr std::size_t max_runs = 16;

  // Tests: the calling thread's run in every table (-1: its CPU's, as normally).
  static void force_run(int run) noexcept;

 private:
  std::mutex lock_;
  std::vector<void*> chunks_;
  char* next_ = nullptr;  // the current chunk's next block, up to end_
  char* end_ = nullptr;
  struct run {
    char* next = nullptr;  // the run's next block, up to end
    char* end = nullptr;
  };
  run runs_[max_runs];
  void* returned_ = nullptr;  // blocks given back, linked through their first word
  std::size_t carved_ = 0;    // blocks carved from chunks (given back ones included)
  std::atomic<std::size_t> bytes_{0};
};

}  // namespace palrt::gc::internal

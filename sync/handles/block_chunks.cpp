// SPDX-License-Identifier: MIT
// The chunks a table's blocks are carved from (internal/block_chunks.hpp).
#include "palrt/gc/internal/block_chunks.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "palrt/gc/detail/handle_fast_path.hpp"
#include "palrt/pal/cpu.hpp"

namespace palrt::gc::internal {

using detail::handle_block_bytes;

namespace {
// Tests pin a thread's run (handle_table_access::set_block_run); -1: its CPU's.
constinit thread_local int forced_run = -1;
}  // namespace

void block_chunks::force_run(int run) noexcept { forced_run = run; }

block_chunks::~block_chunks() {
  for (void* chunk : chunks_) std::free(chunk);
}

void* block_chunks::carve() noexcept {
  static_assert(run_bytes % handle_block_bytes == 0 && first_chunk_blocks * handle_block_bytes % run_bytes == 0);
  constexpr std::size_t blocks_per_run = run_bytes / handle_block_bytes;
  std::lock_guard guard(lock_);
  if (void* block = returned_) {
    std::memcpy(&returned_, block, sizeof returned_);
    return block;
  }
  run& r = runs_[static_cast<std::size_t>(forced_run >= 0 ? forced_run : pal::current_cpu()) % max_runs];
  if (r.next == r.end) {
    if (next_ == end_) {
      // A whole number of runs: a chunk ends where its last run does.
      const std::size_t blocks = (std::clamp(carved_, first_chunk_blocks, max_chunk_blocks) + blocks_per_run - 1) /
                                 blocks_per_run * blocks_per_run;
      try {
        chunks_.reserve(chunks_.size() + 1);  // before the chunk: then push_back cannot throw
      } catch (const std::bad_alloc&) {
        return nullptr;
      }
      void* chunk = std::aligned_alloc(run_bytes, blocks * handle_block_bytes);
      if (!chunk) return nullptr;
      chunks_.push_back(chunk);
      next_ = static_cast<char*>(chunk);
      end_ = next_ + blocks * handle_block_bytes;
      bytes_.store(bytes_.load(std::memory_order_relaxed) + blocks * handle_block_bytes, std::memory_order_relaxed);
    }
    r.next = next_;
    r.end = next_ + run_bytes;
    next_ = r.end;
  }
  void* block = r.next;
  r.next += handle_block_bytes;
  ++carved_;
  return block;
}

void block_chunks::give_back(void* block) noexcept {
  std::lock_guard guard(lock_);
  std::memcpy(block, &returned_, sizeof returned_);
  returned_ = block;
}

}  // namespace palrt::gc::internal

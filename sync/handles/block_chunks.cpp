// SPDX-License-Identifier: MIT
// The chunks a table's blocks are carved from (internal/block_chunks.hpp).
#include "palrt/gc/internal/block_chunks.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "palrt/gc/detail/handle_fast_path.hpp"

namespace palrt::gc::internal {

using detail::handle_block_bytes;

block_chunks::~block_chunks() {
  for (void* chunk : chunks_) std::free(chunk);
}

void* block_chunks::carve() noexcept {
  std::lock_guard guard(lock_);
  if (void* block = returned_) {
    std::memcpy(&returned_, block, sizeof returned_);
    return block;
  }
  if (next_ == end_) {
    const std::size_t blocks = std::clamp(carved_, first_chunk_blocks, max_chunk_blocks);
    try {
      chunks_.reserve(chunks_.size() + 1);  // before the chunk: then push_back cannot throw
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    void* chunk = std::aligned_alloc(handle_block_bytes, blocks * handle_block_bytes);
    if (!chunk) return nullptr;
    chunks_.push_back(chunk);
    next_ = static_cast<char*>(chunk);
    end_ = next_ + blocks * handle_block_bytes;
    bytes_.store(bytes_.load(std::memory_order_relaxed) + blocks * handle_block_bytes, std::memory_order_relaxed);
  }
  void* block = next_;
  next_ += handle_block_bytes;
  ++carved_;
  return block;
}

void block_chunks::give_back(void* block) noexcept {
  std::lock_guard guard(lock_);
  std::memcpy(block, &returned_, sizeof returned_);
  returned_ = block;
}

}  // namespace palrt::gc::internal

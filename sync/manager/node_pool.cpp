// SPDX-License-Identifier: MIT
// The lock-free pool of posted work nodes (internal/node_pool.hpp states the protocol).
#include "palrt/sync/internal/node_pool.hpp"

#include <bit>
#include <new>

namespace palrt::sync::internal {
namespace {

constexpr std::uint32_t index_of(std::uint64_t head) noexcept { return static_cast<std::uint32_t>(head); }
constexpr std::uint64_t next_head(std::uint64_t head, std::uint32_t index) noexcept {
  return ((head >> 32) + 1) << 32 | index;
}

}  // namespace

node_pool::~node_pool() {
  for (int k = 0; k < max_chunks; ++k) {
    // relaxed: the pool's owner destroys it after every other user is done.
    work_node* const chunk = chunks_[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
    if (!chunk) break;
    const std::size_t size = std::size_t{first_chunk} << k;
    for (std::size_t i = 0; i < size; ++i) chunk[i].~work_node();
    std::allocator<work_node>().deallocate(chunk, size);  // as grow() allocated it
  }
}

// Index i lives in chunk k = bit_width(i + 64) - 7, at offset i + 64 - (64 << k): chunk k
// starts at index 64 * (2^k - 1).
work_node& node_pool::at(std::uint32_t index) const noexcept {
  const std::uint64_t shifted = std::uint64_t{index} + first_chunk;
  const int k = static_cast<int>(std::bit_width(shifted)) - 7;
  // acquire: the chunk's nodes were constructed before the pointer was stored (release).
  work_node* const chunk = chunks_[static_cast<std::size_t>(k)].load(std::memory_order_acquire);
  return chunk[shifted - (std::uint64_t{first_chunk} << k)];
}

work_node& node_pool::take() {
  for (;;) {
    // acquire: the node's fields as its last giver left them (its task empty), and its chunk.
    std::uint64_t head = head_.load(std::memory_order_acquire);
    while (index_of(head) != no_node) {
      work_node& n = at(index_of(head));
      // relaxed: a stale successor makes the compare-exchange below fail (the tag moved).
      const std::uint32_t next = n.pool_free_next.load(std::memory_order_relaxed);
      // acquire on both outcomes: as the load above, for the head we now hold or retry with.
      if (head_.compare_exchange_weak(head, next_head(head, next), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        ++n.generation;  // ours alone now: a ticket for its previous use no longer matches
        return n;
      }
    }
    std::lock_guard lock(grow_mutex_);
    // Another thread may have grown the pool while we waited: look again before growing.
    if (index_of(head_.load(std::memory_order_acquire)) == no_node) grow();
  }
}

void node_pool::grow() {
  if (chunk_count_ == max_chunks) throw std::bad_alloc();
  const int k = chunk_count_;
  const std::uint32_t size = first_chunk << k;
  const std::uint32_t first = first_chunk * ((std::uint32_t{1} << k) - 1);
  // Raw storage, constructed in place (work_node is over-aligned, and the allocator honours
  // that with the aligned operator new); the destructor destroys and deallocates it.
  work_node* const chunk = std::allocator<work_node>().allocate(size);
  for (std::uint32_t i = 0; i < size; ++i) {
    work_node* const n = ::new (static_cast<void*>(chunk + i)) work_node();
    n->pool_index = first + i;
    // relaxed: published with the chunk by the push below.
    n->pool_free_next.store(i + 1 < size ? first + i + 1 : no_node, std::memory_order_relaxed);
  }
  chunks_[static_cast<std::size_t>(k)].store(chunk, std::memory_order_release);  // release: pairs with at()
  chunk_count_ = k + 1;
  made_.fetch_add(size, std::memory_order_relaxed);  // relaxed: a statistic
  give_chain(chunk[0], chunk[size - 1]);
}

void node_pool::give_chain(work_node& first, work_node& last) noexcept {
  std::uint64_t head = head_.load(std::memory_order_relaxed);  // relaxed: checked by the CAS
  do {
    // relaxed: published by the compare-exchange's release.
    last.pool_free_next.store(index_of(head), std::memory_order_relaxed);
    // release: the next taker of these nodes sees what we did to them (their tasks reset).
  } while (!head_.compare_exchange_weak(head, next_head(head, first.pool_index), std::memory_order_release,
                                        std::memory_order_relaxed));
}

std::uint64_t node_pool::bound(std::uint64_t most_in_use) noexcept {
  // Chunks double: the pool grows only when all its nodes are in use, so it holds fewer than
  // twice the most in use, and at least the first chunk.
  std::uint64_t made = first_chunk;
  while (made < most_in_use) made = 2 * made + first_chunk;
  return made;
}

}  // namespace palrt::sync::internal

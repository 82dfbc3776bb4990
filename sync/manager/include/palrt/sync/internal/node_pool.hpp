// SPDX-License-Identifier: MIT
// The pool posted work nodes come from, so that a steady stream of post() allocates nothing
// and takes no lock.
//
// A free list that any thread pops from (post) and pushes to (the worker's batches of run
// nodes, cancel), lock-free: a Treiber stack whose head is one 64-bit word, a 32-bit node
// index and a 32-bit tag bumped by every change. The tag is what makes a pop safe against ABA:
// a popper that read head A and A's successor B, then stalled while others popped A and B and
// pushed A back, fails its compare-exchange because the tag moved on (it would wrap only after
// 2^32 changes within one stall). Reading A's successor after A was popped by another thread
// is harmless: nodes are never freed while the pool lives, and the read is atomic.
//
// The pool never frees a node while it lives for a second reason: a work_ticket may name a
// node long after its item ran, and cancel() must be able to read the node's claim word to see
// that. Nodes are made in chunks that double in size (64, 128, 256... nodes), under a mutex:
// the only lock, taken only to grow. So memory is bounded by about twice the most items ever
// queued at once plus one batch the worker holds before handing it back (worker.cpp), and
// returned when the pool (its sync_manager) is destroyed. A cancelled item counts as queued
// until the worker reaches its place in the queue and drops it (work_node.hpp): the lock-free
// queue cannot unlink it earlier.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "palrt/sync/internal/work_node.hpp"

namespace palrt::sync::internal {

class node_pool {
 public:
  node_pool() = default;
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;
  ~node_pool();

  // A free node (its task empty), its generation bumped; grows the pool if none is free.
  // Throws std::bad_alloc.
  work_node& take();
  // Returns a node whose task is already empty.
  void give(work_node& node) noexcept { give_chain(node, node); }
  // Returns a chain of such nodes linked through pool_free_next, from `first` to `last`.
  void give_chain(work_node& first, work_node& last) noexcept;

  // Nodes made so far; relaxed: a statistic.
  std::uint64_t allocations() const noexcept { return made_.load(std::memory_order_relaxed); }
  // The most nodes the pool makes while at most `most_in_use` are taken at once.
  static std::uint64_t bound(std::uint64_t most_in_use) noexcept;

 private:
  static constexpr std::uint32_t no_node = UINT32_MAX;
  static constexpr std::uint32_t first_chunk = 64;
  static constexpr int max_chunks = 26;  // 64 * (2^26 - 1) nodes: more than 32-bit indices need

  work_node& at(std::uint32_t index) const noexcept;
  void grow();  // under grow_mutex_

  // index of the first free node | tag << 32
  alignas(64) std::atomic<std::uint64_t> head_{no_node};
  // Chunk k holds first_chunk << k nodes; written once, under grow_mutex_, before any of its
  // indices is pushed (the push's release publishes it).
  alignas(64) std::array<std::atomic<work_node*>, max_chunks> chunks_{};
  std::mutex grow_mutex_;
  int chunk_count_ = 0;  // guarded by grow_mutex_
  std::atomic<std::uint64_t> made_{0};
};

}  // namespace palrt::sync::internal

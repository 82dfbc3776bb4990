// SPDX-License-Identifier: MIT
// The pool posted work nodes come from, so that a steady stream of post() allocates nothing.
//
// A free list under its own small lock (taken once per post by the poster, and once per
// batch of run items by the worker; neither calls out while holding it). The pool never frees a node while
// it lives: a work_ticket may name a node long after its item ran, and cancel() must be able
// to read the node's id to see that. So memory is bounded by the most items ever queued at
// once plus one batch the worker holds before handing it back (worker.cpp), and returned
// when the pool (its sync_manager) is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "palrt/sync/internal/adaptive_mutex.hpp"
#include "palrt/sync/internal/work_node.hpp"

namespace palrt::sync::internal {

class node_pool {
 public:
  node_pool() = default;
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;
  ~node_pool();

  // A free node (its task empty), allocated if none is free. Throws std::bad_alloc.
  work_node& take();
  // Returns a node whose task is already empty.
  void give(work_node& node) noexcept;
  // Returns a chain of such nodes linked through pool_free_next, from `first` to `last`.
  void give_chain(work_node& first, work_node& last) noexcept;

  // Nodes made so far (each one allocation); relaxed: a statistic.
  std::uint64_t allocations() const noexcept { return allocations_.load(std::memory_order_relaxed); }

 private:
  adaptive_mutex mutex_;
  work_node* all_ = nullptr;   // every node made, for the destructor
  work_node* free_ = nullptr;  // the free list
  std::atomic<std::uint64_t> allocations_{0};
};

}  // namespace palrt::sync::internal

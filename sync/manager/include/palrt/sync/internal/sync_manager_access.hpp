// SPDX-License-Identifier: MIT
// What tests reach in the sync manager beyond its public API: its worker's service thread
// (tid, name, wake-ups), read-only, the pools' allocation counts, the worker's parks, and a
// hook that holds the worker just before it parks.
#pragma once

#include <cstdint>

#include "palrt/sync/internal/service_thread_access.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync::internal {

class sync_manager_access {
 public:
  static const service_thread& worker(const sync_manager& m) noexcept { return m.worker_; }
  // Items posted or invoked that the worker has not taken yet (timers included): how a test
  // knows that another thread's invoke is queued, instead of sleeping. Only while the worker
  // is held inside a work item (worker_gate in the tests), so nothing is taken meanwhile.
  static std::uint64_t items_waiting(const sync_manager& m) noexcept;
  // Times the worker has entered a park (a futex or epoll wait), counted just before the
  // system call: a test waits for it to grow, then sees the thread sleeping in /proc.
  static std::uint64_t parks(const sync_manager& m) noexcept;
  // Queue nodes the manager's pool has allocated (each once, then reused).
  static std::uint64_t node_allocations(const sync_manager& m) noexcept;
  // The most nodes the pool ever allocates when at most `most_queued` items are queued at
  // once: those, plus the batch of run nodes the worker holds before handing them back.
  static std::uint64_t node_pool_bound(std::uint64_t most_queued) noexcept;
  // Invoke contexts allocated by all threads because their slot was empty (a thread's first
  // invoke, or a nested one).
  static std::uint64_t invoke_context_allocations() noexcept;
  // Calls hook(arg) on the worker each time it has looked for work a last time, found none, and
  // is about to park: a test holds it there while it posts (null: no hook). Set it while the
  // worker is held in a work item or before it starts.
  static void before_park(sync_manager& m, void (*hook)(void*), void* arg) noexcept;
  // Calls hook() on the worker between its look at the small-item ring and its look at the
  // normal-priority inbox (work_queue.cpp), in every manager (null: none).
  static void between_ring_and_inbox_looks(void (*hook)()) noexcept;
  // How many small items the ring holds before posts of them use nodes (post_ring.hpp), and
  // how many are in it now (only while the worker is held, as items_waiting).
  static std::uint64_t ring_capacity() noexcept;
  static std::uint64_t ring_items_waiting(const sync_manager& m) noexcept;
};

}  // namespace palrt::sync::internal

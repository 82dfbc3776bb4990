// SPDX-License-Identifier: MIT
// What tests reach in the sync manager beyond its public API: its worker's service thread
// (tid, name, wake-ups), read-only, the pools' allocation counts, and the worker's parks.
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
};

}  // namespace palrt::sync::internal

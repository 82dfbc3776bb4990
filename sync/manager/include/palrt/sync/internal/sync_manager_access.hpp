// SPDX-License-Identifier: MIT
// What tests reach in the sync manager beyond its public API: its worker's service thread
// (tid, name, wake-ups), read-only, and the pools' allocation counts.
#pragma once

#include <cstdint>

#include "palrt/sync/internal/service_thread_access.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync::internal {

class sync_manager_access {
 public:
  static const service_thread& worker(const sync_manager& m) noexcept { return m.worker_; }
  // Items made ready so far (posted without delay, or invoked): how a test knows that
  // another thread's invoke is queued, instead of sleeping.
  static std::uint64_t items_queued(const sync_manager& m) noexcept;
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

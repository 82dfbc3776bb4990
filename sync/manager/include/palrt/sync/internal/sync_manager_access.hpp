// What tests reach in the sync manager beyond its public API: its worker's service thread
// (tid, name, wake-ups), read-only.
#pragma once

#include "palrt/sync/internal/service_thread_access.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync::internal {

class sync_manager_access {
 public:
  static const service_thread& worker(const sync_manager& m) noexcept { return m.worker_; }
};

}  // namespace palrt::sync::internal

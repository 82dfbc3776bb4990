// What tests reach in palrt's service threads beyond their public APIs: the service thread
// inside each manager (its tid, name and wake-ups), read-only.
#pragma once

#include "palrt/sync/finalizer_thread.hpp"
#include "palrt/sync/internal/service_thread_access.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync::internal {

class finalizer_thread_access {
 public:
  static const service_thread& thread(const finalizer_thread& f) noexcept { return f.thread_; }
};

class sync_manager_access {
 public:
  static const service_thread& worker(const sync_manager& m) noexcept { return m.worker_; }
};

}  // namespace palrt::sync::internal

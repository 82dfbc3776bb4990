#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync {

sync_manager::sync_manager()
    : worker_("palrt-syncmgr", [](const std::atomic<bool>&) {
        // The work queue arrives with the sync-manager issue.
      }) {}

void sync_manager::ensure_worker_started() {
  std::lock_guard lock(start_mutex_);
  worker_.start();
}

void sync_manager::launch_worker() {
  std::lock_guard lock(start_mutex_);
  worker_.launch();
}

void sync_manager::request_stop() noexcept {
  std::lock_guard lock(start_mutex_);
  worker_.request_stop();
}

bool sync_manager::stop(std::chrono::nanoseconds timeout) {
  std::lock_guard lock(start_mutex_);
  return worker_.stop(timeout);
}

}  // namespace palrt::sync

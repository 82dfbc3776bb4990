#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync {

sync_manager::sync_manager()
    : worker_("palrt-syncmgr", [](const std::atomic<bool>&) {
        // No work is posted to the worker yet: a wake-up has nothing to run.
      }) {}

void sync_manager::ensure_worker_started() {
  std::lock_guard lock(start_mutex_);
  worker_.start();
}

void sync_manager::launch_worker() {
  std::lock_guard lock(start_mutex_);
  worker_.launch();
}

void sync_manager::wait_until_worker_running() {
  std::lock_guard lock(start_mutex_);
  worker_.wait_until_running();
}

bool sync_manager::worker_started() const noexcept {
  std::lock_guard lock(start_mutex_);
  return worker_.started();
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

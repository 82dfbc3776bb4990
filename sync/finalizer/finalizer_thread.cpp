#include "palrt/sync/finalizer_thread.hpp"

namespace palrt::sync {

finalizer_thread::finalizer_thread()
    : thread_("palrt-finalizer", [this](const std::atomic<bool>& stop) { drain(stop); }) {}

void finalizer_thread::start() {
  std::lock_guard lock(lifecycle_mutex_);
  thread_.start();
}

void finalizer_thread::launch() {
  std::lock_guard lock(lifecycle_mutex_);
  thread_.launch();
}

void finalizer_thread::wait_until_running() {
  std::lock_guard lock(lifecycle_mutex_);
  thread_.wait_until_running();
}

void finalizer_thread::signal_work() noexcept {
  std::lock_guard lock(lifecycle_mutex_);
  thread_.wake();
}

void finalizer_thread::request_stop() noexcept {
  std::lock_guard lock(lifecycle_mutex_);
  thread_.request_stop();
}

bool finalizer_thread::stop(std::chrono::nanoseconds timeout) {
  std::lock_guard lock(lifecycle_mutex_);
  return thread_.stop(timeout);
}

void finalizer_thread::drain(const std::atomic<bool>& /*stop_requested*/) {
  // No finalization queue exists yet: a wake-up has nothing to drain.
}

}  // namespace palrt::sync

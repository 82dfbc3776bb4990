// The finalizer thread: runs finalizers of dead objects off the collector's thread.
//
// This issue gives it its lifecycle only: started by the bootstrap through the thread
// factory, asleep on its work event while there is nothing to finalize, joined by a bounded
// shutdown. The finalization queue, wait_for_pending_finalizers() and the containment of
// finalizer exceptions arrive with the handle-table issue (see ROADMAP.md), behind
// signal_work(), which is what the collector will call after queueing objects.
#pragma once

#include <chrono>
#include <cstdint>

#include "palrt/sync/service_thread.hpp"

namespace palrt::sync {

class finalizer_thread {
 public:
  finalizer_thread();

  // Throws pal::thread_start_error or pal::barrier_error.
  void start() { thread_.start(); }
  // Wakes the thread to drain the finalization queue.
  void signal_work() noexcept { thread_.wake(); }
  // true if the thread was joined within `timeout`.
  bool stop(std::chrono::nanoseconds timeout = service_thread::default_stop_timeout) {
    return thread_.stop(timeout);
  }

  // The lifecycle in parts, for the bootstrap, which overlaps its service threads' starts
  // and stops.
  service_thread& thread() noexcept { return thread_; }
  const service_thread& thread() const noexcept { return thread_; }

 private:
  void drain(const std::atomic<bool>& stop_requested);
  service_thread thread_;
};

}  // namespace palrt::sync

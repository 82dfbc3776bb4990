// The finalizer thread: runs the finalizers of dead objects off the threads that found them
// dead, so that a collection never waits for host cleanup code.
//
// What it does today: its lifecycle. The bootstrap starts it through the thread factory (so
// membarrier registration comes first); it sleeps on its work event until signal_work();
// shutdown joins it within a bound. Each wake-up drains the finalization queue; palrt has no
// finalization queue yet, so a wake-up finds nothing to run.
//
// Thread-safe: every member may be called from any thread; the lifecycle calls are
// serialised by one lock.
#pragma once

#include <chrono>
#include <mutex>

#include "palrt/sync/service_thread.hpp"

namespace palrt::sync {

namespace internal {
class finalizer_thread_access;
}

class finalizer_thread {
 public:
  finalizer_thread();

  // Starts the thread and returns once it runs its loop; does nothing if it runs already.
  // Throws pal::thread_start_error or pal::barrier_error, having started nothing.
  void start();
  // The halves of start(), for a caller that overlaps several threads' start-up (the
  // bootstrap): launch() returns once the thread exists (it throws like start()),
  // wait_until_running() once it runs its loop.
  void launch();
  void wait_until_running();

  // Wakes the thread to drain the finalization queue. Does nothing before the first start.
  void signal_work() noexcept;

  // Asks the thread to finish without waiting; stop() then joins it.
  void request_stop() noexcept;
  // true if the thread was joined within `timeout` (or never started); false if it missed
  // the deadline and was detached (it finishes on its own; the caller reports it).
  bool stop(std::chrono::nanoseconds timeout = service_thread::default_stop_timeout);

 private:
  friend class internal::finalizer_thread_access;
  void drain(const std::atomic<bool>& stop_requested);
  mutable std::mutex lifecycle_mutex_;
  service_thread thread_;
};

}  // namespace palrt::sync

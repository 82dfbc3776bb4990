// The sync manager: the waitable objects and the worker thread a runtime's PAL needs.
//
// What it does today: its worker's lifecycle. The worker starts lazily, at the first
// request that needs it, unless the host asks for it eagerly at bootstrap (a thread nobody
// uses yet is startup cost for nothing; upstream CoreCLR is removing its eager startup sync
// thread for that reason). Nothing posts work to it yet, so a wake-up finds nothing to run.
//
// Thread-safe: every member may be called from any thread; the lifecycle calls are
// serialised by one lock.
#pragma once

#include <chrono>
#include <mutex>

#include "palrt/sync/service_thread.hpp"

namespace palrt::sync {

namespace internal {
class sync_manager_access;
}

class sync_manager {
 public:
  sync_manager();

  // Starts the worker if it is not running yet and returns once it runs its loop. Throws
  // pal::thread_start_error or pal::barrier_error, having started nothing.
  void ensure_worker_started();
  // Creates the worker without waiting for it to run (the bootstrap's eager start, which
  // waits for all its service threads at once); throws like the above.
  void launch_worker();
  // Returns once a launched worker runs its loop; at once if none was launched.
  void wait_until_worker_running();
  bool worker_started() const noexcept;
  // Asks the worker to finish without waiting (stop() then joins it).
  void request_stop() noexcept;
  // true if the worker was joined within `timeout` (or never started); false if it missed
  // the deadline and was detached (the caller reports it).
  bool stop(std::chrono::nanoseconds timeout = service_thread::default_stop_timeout);

 private:
  friend class internal::sync_manager_access;
  mutable std::mutex start_mutex_;
  service_thread worker_;
};

}  // namespace palrt::sync

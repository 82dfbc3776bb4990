// The sync manager: the waitable objects and the worker thread a runtime's PAL needs.
//
// This issue gives it the worker's lifecycle only; waitable objects, waits, APCs, process
// handles and the work queue arrive with the sync-manager issue (ROADMAP.md). The worker
// starts lazily, at the first request that needs it, unless the host asks for it eagerly
// (upstream CoreCLR is removing its eager startup sync thread: a thread nobody uses yet is
// startup cost for nothing).
#pragma once

#include <chrono>
#include <mutex>

#include "palrt/sync/service_thread.hpp"

namespace palrt::sync {

class sync_manager {
 public:
  sync_manager();

  // Starts the worker if it is not running yet. Thread-safe. Throws
  // pal::thread_start_error or pal::barrier_error.
  void ensure_worker_started();
  // Creates the worker without waiting for it to run (the bootstrap's eager start, which
  // waits for all its service threads at once). Thread-safe; throws like the above.
  void launch_worker();
  bool worker_started() const noexcept { return worker_.started(); }
  // Asks the worker to finish without waiting (stop() then joins it). Thread-safe.
  void request_stop() noexcept;
  // true if the worker was joined within `timeout` (or never started).
  bool stop(std::chrono::nanoseconds timeout = service_thread::default_stop_timeout);

  service_thread& worker() noexcept { return worker_; }
  const service_thread& worker() const noexcept { return worker_; }

 private:
  std::mutex start_mutex_;
  service_thread worker_;
};

}  // namespace palrt::sync

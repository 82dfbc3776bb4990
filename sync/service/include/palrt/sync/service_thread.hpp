// SPDX-License-Identifier: MIT
// The lifecycle every palrt service thread shares (the finalizer, the sync manager's worker):
// started through pal's thread factory, so membarrier registration comes first; start()
// returns only once the thread runs its loop (launch() as soon as it exists: a wake-up or a
// stop request made before it reaches its loop is kept for it); idle, it sleeps on a futex (wake_event) and
// costs nothing; stop() asks it to finish, wakes it and joins it within a bound.
//
// The loop calls `work(stop_requested)` on the service thread after each wake-up. `work`
// should return promptly once the flag is true: that is how shutdown stays bounded when
// there is a long queue.
//
// Each launch has state of its own (wake-up event, stop flag), co-owned by its thread. A
// thread that missed its stop deadline is detached with its state, so it still sees its
// stop request and finishes on its own, and a later launch neither revives it nor shares
// anything with it.
//
// Not thread-safe: one owner drives the lifecycle (finalizer_thread and sync_manager
// serialise their callers). wake() may be called from any thread, but not concurrently with
// launch(), start() or destruction.
//
// After fork() (palrt/pal/fork.hpp): in a child, a thread launched in the parent does not
// exist: started() is false there, and stop() and join() return true at once (see
// pal::managed_thread). Its owners refuse to launch it again in the child.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "palrt/pal/thread_factory.hpp"

namespace palrt::sync {

namespace internal {
class service_thread_access;
}

class service_thread {
 public:
  using work_fn = std::function<void(const std::atomic<bool>& stop_requested)>;

  service_thread(std::string name, work_fn work);
  service_thread(const service_thread&) = delete;
  service_thread& operator=(const service_thread&) = delete;
  // Stops the thread (default_stop_timeout) if it still runs.
  ~service_thread();

  static constexpr std::chrono::nanoseconds default_stop_timeout = std::chrono::seconds(2);

  // Starts the thread and waits until it has entered its loop: launch() and then
  // wait_until_running(). Throws pal::thread_start_error (code() = errno) or
  // pal::barrier_error, having started nothing. Calling it on a started thread does nothing.
  void start();
  // The two halves of start(), so that a caller starting several threads can overlap their
  // start-up latencies: launch() returns once the kernel created the thread (errors are
  // thrown here), wait_until_running() once it has entered its loop (at once if not started).
  void launch();
  void wait_until_running();

  // Makes the loop run `work` once more (coalesces with pending wake-ups). Does nothing
  // before the first launch.
  void wake() noexcept;

  // Requests stop, wakes the thread and waits up to `timeout` for it to finish:
  // request_stop() (once per launch: a second request wakes nothing) and then join(). true if it was joined (or never
  // started). A thread that did not finish in time is detached with the state it uses, so nothing is freed under it;
  // the caller reports it. The thread may be started again afterwards.
  [[nodiscard]] bool stop(std::chrono::nanoseconds timeout = default_stop_timeout);
  // The two halves of stop(), so that several threads can wind down at the same time.
  void request_stop() noexcept;
  [[nodiscard]] bool join(std::chrono::nanoseconds timeout = default_stop_timeout);

  bool started() const noexcept { return thread_.joinable(); }
  const std::string& name() const noexcept { return name_; }
  // Kernel thread id of the current launch once it runs, else 0.
  pid_t tid() const noexcept;

 private:
  friend class internal::service_thread_access;
  struct launch_state;
  std::string name_;
  work_fn work_;
  std::shared_ptr<launch_state> state_;  // of the current or last launch; null before the first
  pal::managed_thread thread_;
};

}  // namespace palrt::sync

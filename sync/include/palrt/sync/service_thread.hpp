// The lifecycle every palrt service thread shares (finalizer, sync manager worker, and the
// ones later issues add): started through pal's thread factory, so registration comes first;
// start() returns only once the thread runs its loop; idle, it sleeps on a futex
// (wake_event) and costs nothing; stop() asks it to finish, wakes it and joins it within a
// bound.
//
// The loop calls `work(stop_requested)` on the service thread after each wake-up. `work`
// should return promptly once the flag is true: that is how shutdown stays bounded when
// there is a long queue (the finalizer stops draining and reports what it left).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"

namespace palrt::sync {

class service_thread {
 public:
  using work_fn = std::function<void(const std::atomic<bool>& stop_requested)>;

  service_thread(std::string name, work_fn work);
  service_thread(const service_thread&) = delete;
  service_thread& operator=(const service_thread&) = delete;
  // Stops the thread (default_stop_timeout) if it still runs.
  ~service_thread();

  static constexpr std::chrono::milliseconds default_stop_timeout{2000};

  // Starts the thread and waits until it has entered its loop: launch() and then
  // wait_until_running(). Throws pal::thread_start_error (code() = errno) or
  // pal::barrier_error. Calling it on a started thread does nothing.
  void start();
  // The two halves of start(), so that a caller starting several threads can overlap their
  // start-up latencies: launch() returns once the kernel created the thread (errors are
  // thrown here), wait_until_running() once it has entered its loop.
  void launch();
  void wait_until_running();

  // Makes the loop run `work` once more (coalesces with pending wake-ups). Any thread.
  void wake() noexcept;

  // Requests stop, wakes the thread and waits up to `timeout` for it to finish:
  // request_stop() and then join(). true if it was joined (or never started). A thread that
  // did not finish in time is detached with the state it uses, which it owns jointly, so
  // nothing is freed under it; the caller reports it.
  bool stop(std::chrono::nanoseconds timeout = default_stop_timeout);
  // The two halves of stop(), so that several threads can wind down at the same time.
  void request_stop() noexcept;
  bool join(std::chrono::nanoseconds timeout = default_stop_timeout);

  bool started() const noexcept { return thread_.joinable(); }
  bool stop_requested() const noexcept;
  const std::string& name() const noexcept { return name_; }
  pid_t tid() const noexcept;              // kernel thread id once started, else 0
  std::uint64_t wakeups() const noexcept;  // times the loop woke up (tests, diagnostics)

 private:
  struct shared_state;
  std::string name_;
  std::shared_ptr<shared_state> state_;
  pal::managed_thread thread_;
};

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
#include "palrt/sync/service_thread.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "palrt/pal/wake_event.hpp"
#include "palrt/sync/internal/service_thread_access.hpp"

namespace palrt::sync {

// One per launch, co-owned by the launch's thread: a thread detached after a missed stop
// deadline keeps its own stop flag and event, so a later launch cannot reset or share them.
struct service_thread::launch_state {
  explicit launch_state(work_fn w) : work(std::move(w)) {}
  const work_fn work;
  pal::wake_event wake;
  pal::wake_event running;           // set once by the thread when it enters its loop
  std::atomic<bool> has_run{false};  // the same fact, for callers that ask more than once
  // release/acquire: the stopper's writes before stop() are visible to the final loop turn.
  std::atomic<bool> stop{false};
  std::atomic<pid_t> tid{0};
  std::atomic<std::uint64_t> wakeups{0};  // relaxed: a statistic
};

service_thread::service_thread(std::string name, work_fn work) : name_(std::move(name)), work_(std::move(work)) {}

// stop() says whether the thread was joined; a destructor has nobody to tell, and a thread it
// detached finishes on its own (it owns its state).
service_thread::~service_thread() { (void)stop(); }

void service_thread::start() {
  launch();
  wait_until_running();
}

void service_thread::launch() {
  if (started()) return;
  auto state = std::make_shared<launch_state>(work_);
  // The closure co-owns its launch's state and touches nothing else, so a thread detached
  // after a missed stop deadline still has valid memory.
  thread_ = pal::start_thread({name_, 0}, [state] {
    state->tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_relaxed);
    state->has_run.store(true, std::memory_order_release);
    state->running.set();
    for (;;) {
      state->wake.wait();
      if (state->stop.load(std::memory_order_acquire)) break;
      state->wakeups.fetch_add(1, std::memory_order_relaxed);
      if (state->work) state->work(state->stop);
    }
  });
  state_ = std::move(state);  // only once the thread exists: a failed start leaves the old state
}

void service_thread::wait_until_running() {
  // A thread start takes ~50 us: stay awake for it (see wake_event::wait_for). A wait that
  // timed out only means the loop looks at has_run again.
  while (started() && !state_->has_run.load(std::memory_order_acquire))
    (void)state_->running.wait_for(std::chrono::milliseconds(100), std::chrono::microseconds(200));
}

void service_thread::wake() noexcept {
  if (state_) state_->wake.set();
}

void service_thread::request_stop() noexcept {
  if (!started()) return;
  // Once per launch: a second request (stop() after request_stop(), as a shutdown asks all
  // threads first and joins them after) would only wake the thread again, a futex call while
  // it is still on its way out. release: pairs with the loop's acquire (launch_state::stop).
  if (state_->stop.exchange(true, std::memory_order_release)) return;
  state_->wake.set();
}

bool service_thread::join(std::chrono::nanoseconds timeout) {
  if (!started()) return true;
  if (thread_.join_for(timeout)) return true;
  thread_.detach();  // with its launch state (see launch()); the owner reports it as not joined
  return false;
}

bool service_thread::stop(std::chrono::nanoseconds timeout) {
  request_stop();
  return join(timeout);
}

pid_t service_thread::tid() const noexcept { return state_ ? state_->tid.load(std::memory_order_relaxed) : 0; }

namespace internal {
std::uint64_t service_thread_access::wakeups(const service_thread& t) noexcept {
  return t.state_ ? t.state_->wakeups.load(std::memory_order_relaxed) : 0;
}
}  // namespace internal

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
// Drives POSIX thread cancellation and Boost interruption against one call, for the tests of
// what palrt's headers say about them ("not a cancellation point"): the call runs on a thread
// of its own that has a request pending when the call begins (pthread_cancel() of itself,
// deferred: it acts at the next cancellation point; or boost::thread::interrupt() before the
// call: at the next interruption point). A call that is such a point is unwound there and
// never returns; one that is not returns, and the request acts at the first point after it.
//
// A call that waits for something the test controls: `blocked` says when the call is waiting
// (default: the thread sleeps in the kernel), and `release` then runs on the test's thread,
// also if the thread ended first (the call was unwound), so the call can finish either way.
#pragma once

#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <boost/thread/thread.hpp>
#include <functional>
#include <latch>

#include "thread_state.hpp"

namespace palrt::testing {

struct cancellation_outcome {
  bool returned = false;     // the call came back (it is not a cancellation/interruption point)
  bool acted_after = false;  // the request then acted at the first point after the call
};

namespace detail {

// seq_cst throughout: a test helper, nothing here is on a hot path.
struct cancellable_call {
  std::function<void()> call;
  std::atomic<pid_t> tid{0};
  std::atomic<bool> returned{false};
  std::atomic<bool> ended{false};  // set by a destructor: also when the call is unwound
  std::atomic<bool> interrupted_after{false};
};

// Set on the way out of the thread's body, returned or unwound.
struct mark_ended {
  std::atomic<bool>& ended;
  ~mark_ended() { ended.store(true); }
};

inline void release_when_blocked(cancellable_call& run, const std::function<bool()>& blocked,
                                 const std::function<void()>& release) {
  if (!release) return;
  (void)eventually([&] { return run.tid.load() != 0; });
  const pid_t tid = run.tid.load();
  const auto waiting = blocked ? blocked : std::function<bool()>([tid] { return thread_state(tid) == 'S'; });
  (void)eventually([&] { return run.ended.load() || waiting(); });
  release();
}

inline void* cancel_pending_body(void* context) {
  auto& run = *static_cast<cancellable_call*>(context);
  mark_ended on_exit{run.ended};
  run.tid.store(::gettid());
  ::pthread_cancel(::pthread_self());  // deferred (the type threads start with): pending
  run.call();
  run.returned.store(true);
  ::pthread_testcancel();  // the first cancellation point after the call
  return nullptr;
}

}  // namespace detail

inline cancellation_outcome call_with_cancel_pending(std::function<void()> call, std::function<bool()> blocked = {},
                                                     std::function<void()> release = {}) {
  detail::cancellable_call run;
  run.call = std::move(call);
  pthread_t thread;
  if (::pthread_create(&thread, nullptr, &detail::cancel_pending_body, &run) != 0) return {};
  detail::release_when_blocked(run, blocked, release);
  void* result = nullptr;
  ::pthread_join(thread, &result);
  return {run.returned.load(), result == PTHREAD_CANCELED};
}

inline cancellation_outcome call_with_interrupt_pending(std::function<void()> call, std::function<bool()> blocked = {},
                                                        std::function<void()> release = {}) {
  detail::cancellable_call run;
  run.call = std::move(call);
  std::latch requested(1);  // not an interruption point
  boost::thread thread([&run, &requested] {
    detail::mark_ended on_exit{run.ended};
    run.tid.store(::gettid());
    requested.wait();
    run.call();  // an interruption point throws boost::thread_interrupted, which ends the thread
    run.returned.store(true);
    try {
      boost::this_thread::interruption_point();
    } catch (const boost::thread_interrupted&) {
      run.interrupted_after.store(true);
    }
  });
  thread.interrupt();
  requested.count_down();
  detail::release_when_blocked(run, blocked, release);
  thread.join();
  return {run.returned.load(), run.interrupted_after.load()};
}

}  // namespace palrt::testing

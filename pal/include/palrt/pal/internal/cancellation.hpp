// SPDX-License-Identifier: MIT
// Why palrt's blocking calls are not POSIX cancellation points, and the one way they keep
// from being one.
//
// glibc acts on a pthread_cancel() request at a cancellation point by unwinding the thread
// (abi::__forced_unwind). Inside palrt that would be wrong wherever it could happen: a wait
// whose blocks are linked into objects' waiter lists, an invoke() whose worker still writes
// the result into the caller's frame, a finalizer's `catch (...)` (the unwind must not be
// swallowed: glibc aborts the process), a noexcept destructor (std::terminate), a join half
// done. So palrt's calls are not cancellation points: what could reach one (a condition
// variable, a sleep, a join, a /proc read, host code palrt runs for the host such as
// finalizers) runs inside a cancellation_disabled scope. A request made meanwhile stays
// pending and acts at the thread's first cancellation point after the call, in the host's
// own code; the call itself runs to its end (a wait without a timeout that nobody satisfies
// never returns, as with a request that arrives while cancellation is disabled anywhere).
//
// Boost interruption (boost::thread::interrupt()) is another mechanism: it acts only at
// Boost's own interruption points (boost::this_thread::interruption_point(), a
// boost::condition_variable wait, boost::thread::join()); the only one palrt reaches is the
// join in pal::managed_thread, which disables it there (thread_factory.cpp).
//
// Asynchronous cancellation (PTHREAD_CANCEL_ASYNCHRONOUS) is out of the question: no palrt
// call is async-cancel-safe, as almost no libc call is.
//
// Cost: two pthread_setcancelstate() calls, a few ns; taken on blocking paths only.
#pragma once

#include <pthread.h>

namespace palrt::pal::internal {

class cancellation_disabled {
 public:
  cancellation_disabled() noexcept { ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &previous_); }
  // Enabling again is not itself a cancellation point (with deferred cancellation, the type
  // threads start with): a pending request waits for the next one.
  ~cancellation_disabled() { ::pthread_setcancelstate(previous_, nullptr); }
  cancellation_disabled(const cancellation_disabled&) = delete;
  cancellation_disabled& operator=(const cancellation_disabled&) = delete;

 private:
  int previous_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace palrt::pal::internal

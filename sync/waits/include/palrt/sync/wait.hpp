// SPDX-License-Identifier: MIT
// Waits: wait_one, wait_any and wait_all over palrt's waitable objects (events, semaphores,
// mutexes, threads, processes), with monotonic timeouts, and alertable waits and sleeps.
//
// Example:
//   sync::event_handle done(sync::event_reset::manual);
//   // ... another thread: done.set() ...
//   auto r = sync::wait_one(done, 100ms);        // r.status == wait_status::signalled
//   auto any = sync::wait_any({done, child_process}, 1s);  // any.index: which one
//
// A wait returns when it is satisfied, when its timeout passes, or, for an alertable wait,
// when an APC was queued to the thread (thread_handle.hpp). Satisfying a wait acquires what it
// waited for: an auto-reset event is reset, a semaphore's count taken, a mutex owned.
//   wait_one / wait_any: the first object, in handle order, that is signalled; index says
//     which. Duplicate handles are allowed (the lowest index wins).
//   wait_all: all at once, atomically: the wait acquires every object in one step or none,
//     so no other thread ever sees it holding some of them. Duplicates are rejected.
// Waiters on one object are served first come, first served.
//
// No wake-up is lost: a signal that lands at the same time as the timeout or an APC is
// reported as signalled (as CoreCLR does), and the object was acquired; a wait that reports
// timed_out or alerted acquired nothing.
//
// Timeouts are durations measured on CLOCK_MONOTONIC from the call (never stretched by
// spurious wake-ups or EINTR); `infinite` waits forever; 0 only tests.
//
// Cost: all objects share one lock (a std::mutex), which is what makes wait_all atomic and
// simple; a wait or a set takes it once, a blocked wait once more when it times out. Hosts
// that signal objects from many threads at high rates contend on it; palrt's own hot paths
// (the work queue) do not use it. A wake-up across CPUs costs what the kernel charges for
// one (~27 us on the 2-vCPU VMs of docs/BENCHMARKS.md, wait_any over 64 events included).
//
// Where: a wait works wherever the thread runs code, its exit included: a thread_local's
// destructor may wait whenever the thread_local was made, and so may, on the main thread, a
// global object's destructor after main() returned (thread_handle.hpp).
//
// Cancellation: no wait, and no sleep_for, is a POSIX cancellation point (pthread_cancel) or a
// Boost interruption point (boost::thread::interrupt): each sleeps on a futex, which is
// neither. A request made before or during a wait stays pending; the wait runs its course
// (satisfied, timed out or alerted: one without a timeout that nobody satisfies never
// returns) and the request acts at the thread's next cancellation or interruption point
// after it, in the host's code. APCs are the host's code: an alertable wait runs them with the
// thread's cancellation state as the host left it, so a cancellation point in an APC acts
// there and the thread unwinds out of the wait, which has ended by then: it acquired nothing
// and no object still lists it.
//
// Failure: every wait throws sync_error (handle.hpp) for bad input, having waited for
// nothing and acquired nothing: EINVAL for no handles, duplicates in wait_all or a negative
// timeout; E2BIG for more than max_wait_handles; EBADF for a closed handle (naming its index).
// A thread's first wait may throw std::bad_alloc (its record); the first in the process
// sync_error(EAGAIN) if no pthread key is left for the records (PTHREAD_KEYS_MAX used up).
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <span>

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

enum class wait_status {
  signalled,  // satisfied; index = the object (wait_all: 0)
  abandoned,  // satisfied through a mutex whose owner exited holding it; index = that mutex
  timed_out,  // nothing acquired
  alerted,    // alertable only: APCs ran on this thread; nothing acquired
};

// What a wait did, which only its result says: [[nodiscard]], so every wait's result is used.
struct [[nodiscard]] wait_result {
  wait_status status = wait_status::timed_out;
  std::size_t index = 0;
};

enum class alertable : bool { no = false, yes = true };

wait_result wait_one(const handle& object, std::chrono::nanoseconds timeout = infinite, alertable mode = alertable::no);
wait_result wait_any(std::span<const handle> objects, std::chrono::nanoseconds timeout = infinite,
                     alertable mode = alertable::no);
wait_result wait_all(std::span<const handle> objects, std::chrono::nanoseconds timeout = infinite,
                     alertable mode = alertable::no);
// The same over the handles named in the call: wait_any({done, child_process}, 1s).
wait_result wait_any(std::initializer_list<std::reference_wrapper<const handle>> objects,
                     std::chrono::nanoseconds timeout = infinite, alertable mode = alertable::no);
wait_result wait_all(std::initializer_list<std::reference_wrapper<const handle>> objects,
                     std::chrono::nanoseconds timeout = infinite, alertable mode = alertable::no);
// The same over handles the caller keeps elsewhere (at most max_wait_handles pointers; a
// null pointer counts as a closed handle).
wait_result wait_any(std::span<const handle* const> objects, std::chrono::nanoseconds timeout = infinite,
                     alertable mode = alertable::no);
wait_result wait_all(std::span<const handle* const> objects, std::chrono::nanoseconds timeout = infinite,
                     alertable mode = alertable::no);

// Sleeps for `duration`: timed_out when it passed, or, if alertable, alerted as soon as APCs
// ran. Throws sync_error(EINVAL) for a negative duration.
wait_status sleep_for(std::chrono::nanoseconds duration, alertable mode = alertable::no);

}  // namespace palrt::sync

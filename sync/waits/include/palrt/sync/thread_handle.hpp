// SPDX-License-Identifier: MIT
// Thread handles and asynchronous procedure calls (APCs).
//
// thread_handle::current() is a handle to the calling thread. It becomes signalled when that
// thread exits, so wait_one(t) joins it in the Win32 manner (and works for any thread, not
// only those the waiter started). A thread that exits while it owns mutexes abandons them
// (mutex.hpp). For palrt a thread exits after its thread_local destructors have run: they
// may still wait, and acquire and release mutexes, whenever the thread_local was made. The
// main thread's handle never becomes signalled: returning from main() or calling exit() ends
// the process, not the thread (as ExitProcess does), and the global destructors that run then
// may still wait as the main thread.
//
// queue_apc(t, fn) queues `fn` to thread t. fn runs on t, and only while t is inside an
// alertable wait or sleep (wait.hpp, alertable::yes): never in the middle of other code, so
// an APC needs no more care than code that runs just before the wait returns. The wait then
// runs every queued APC in the order queued and returns wait_status::alerted. An APC queued
// while t is not in an alertable wait waits for the next one. APCs still queued when the
// thread exits never run: they are destroyed with the thread's record, as Win32 discards them.
//
// Thread-safe: any thread may queue APCs to any thread.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <sys/types.h>

#include <functional>

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

class thread_handle : public handle {
 public:
  thread_handle() noexcept = default;  // closed

  // A handle to the calling thread. Throws std::bad_alloc (the thread's record is made on its
  // first use of palrt's waits), or, on the first use in the process, sync_error(EAGAIN) if
  // the process has no pthread key left for the records (wait.hpp).
  static thread_handle current();

  // The kernel's thread id. Throws sync_error(EBADF) on a closed handle.
  pid_t tid() const;
  // Whether the thread has exited. Throws sync_error(EBADF) on a closed handle.
  bool has_exited() const;

 private:
  friend void queue_apc(const thread_handle& thread, std::function<void()> fn);
  using handle::handle;
};

// Queues `fn` to run on `thread` in its next alertable wait (see above). Throws
// sync_error(ESRCH) if the thread has exited (fn is dropped, not run), EINVAL if fn is
// empty, EBADF on a closed handle; std::bad_alloc.
void queue_apc(const thread_handle& thread, std::function<void()> fn);

}  // namespace palrt::sync

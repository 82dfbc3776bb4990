// SPDX-License-Identifier: MIT
// palrt's record of one thread: the waitable thread object (signalled at exit), the futex
// word its waits sleep on, its APC queue and the mutexes it owns.
//
// Made on the thread's first use of the waits and owned by the thread (through a pthread key)
// plus any thread handles. The key's destructor is the thread's exit (for every thread but
// the main one, however it was started), and runs after all of the thread's thread_local
// destructors, which may still wait, acquire and release (thread_record.cpp says why): under
// objects_lock() it marks the record exited, abandons the mutexes it owns and satisfies the
// record's waiters; the APCs still queued are destroyed after the lock is released (they may
// hold anything). The main thread's record is never exited: it serves the global destructors
// that run after main() returns, until the process ends.
//
// After fork(): in the child, the records of the parent's other threads belong to threads
// that do not exist there. Such a record counts as exited (gone()): its thread handles are
// signalled, queue_apc to it fails with ESRCH, and a mutex it owns is abandoned, taken by the
// child's first wait on it with wait_status::abandoned, as if its owner had exited. The
// forking thread goes on in the child: its record is stamped afresh there (the waits' own
// pthread_atfork child handler), so what it owns stays owned.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/sync/internal/waitable_object.hpp"

namespace palrt::sync::internal {

class mutex_object;

// The waits' pthread_atfork child handler: the forking thread's record is the child's.
void refresh_forking_thread() noexcept;

class thread_record final : public waitable_object {
 public:
  explicit thread_record(pid_t tid) noexcept : tid_(tid) {}
  ~thread_record() override;

  bool signalled_for(const thread_record&) const noexcept override { return gone(); }
  bool acquire(thread_record&) noexcept override { return false; }

  pid_t tid() const noexcept { return tid_; }

  // The word this thread's waits sleep on: 0 while waiting, 1 once completed. Stored under
  // objects_lock() by whoever completes the wait; read by the thread without the lock.
  std::atomic<std::uint32_t> wait_word{0};

  // Under objects_lock().
  bool exited_ = false;
  waiter* current_wait_ = nullptr;  // the wait the thread is in, if any
  std::deque<std::function<void()>> apcs_;
  mutex_object* owned_mutexes_ = nullptr;  // intrusive list through mutex_object

  // On the thread itself, at exit (see above).
  void exit() noexcept;
  // Under objects_lock(): the thread exited, or is a thread of the parent in a fork()ed
  // child (see above).
  bool gone() const noexcept { return exited_ || alive_in_.forked(); }

 private:
  friend void refresh_forking_thread() noexcept;
  const pid_t tid_;
  // The fork generation the thread is known to exist in (see above).
  pal::internal::fork_stamp alive_in_;
};

// The calling thread's record, made on first use, also during the thread's exit (from a
// thread_local's or a global's destructor). Throws std::bad_alloc; and sync_error with the
// errno of pthread_key_create (EAGAIN: the process has no key left) on the first use in the
// process, if it cannot make the key the records need.
thread_record& current_thread_record();
std::shared_ptr<thread_record> current_thread_record_shared();

// On the calling thread, outside any lock: runs its queued APCs, in order, until none is
// left (including APCs queued by the APCs). An exception from an APC propagates to the
// waiter's caller; the APCs after it stay queued for the next alertable wait.
void run_queued_apcs(thread_record& self);

}  // namespace palrt::sync::internal

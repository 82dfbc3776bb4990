// SPDX-License-Identifier: MIT
// The process object behind process_handle: a pidfd, and the exit the sync manager's worker
// records when the pidfd becomes readable. State guarded by objects_lock().
//
// Only one waitid() can reap a child, so every handle to one child must share one object:
// open() keeps the children it opened, until they are reaped, in a process-wide registry
// (process_handle.cpp), and hands out the registered object for a pid that is still such a
// child. Every sync_manager that opened it watches the same object, and the first to see the
// exit reaps it for all.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "palrt/sync/internal/waitable_object.hpp"
#include "palrt/sync/process_handle.hpp"

namespace palrt::sync::internal {

class process_object final : public waitable_object, public std::enable_shared_from_this<process_object> {
 public:
  // The object for `pid`: the registered one if `pid` is a child of ours that palrt opened
  // and has not reaped yet, else a new one with a pidfd of its own (registered if `pid` is
  // a child). Throws sync_error: ESRCH (no such process: it exited and was reaped, or never
  // existed), EINVAL (pid <= 0), or the errno of pidfd_open (ENOSYS before Linux 5.3,
  // EMFILE...).
  static std::shared_ptr<process_object> open(pid_t pid);
  ~process_object() override;

  bool signalled_for(const thread_record&) const noexcept override { return exited_; }
  bool acquire(thread_record&) noexcept override { return false; }

  pid_t pid() const noexcept { return pid_; }
  int pidfd() const noexcept { return pidfd_; }

  // Once the pidfd is readable (the process exited): reaps it if it is a child (waitid), then
  // under objects_lock() records the exit and satisfies the waiters. By the worker of each
  // sync manager watching the object; the first call does it, later ones do nothing.
  void reap_and_signal() noexcept;

  // Under objects_lock().
  bool exited_ = false;
  std::optional<process_exit_status> status_;  // empty after exit: unavailable

 private:
  friend class child_registry;
  process_object(pid_t pid, int pidfd) noexcept : pid_(pid), pidfd_(pidfd) {}
  const pid_t pid_;
  const int pidfd_;
  // Under the registry's lock (process_handle.cpp).
  bool reaped_ = false;      // reap_and_signal() ran
  bool registered_ = false;  // linked in the registry below
  process_object* prev_child_ = nullptr;
  process_object* next_child_ = nullptr;
};

}  // namespace palrt::sync::internal

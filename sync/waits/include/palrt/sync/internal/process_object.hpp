// The process object behind process_handle: a pidfd, and the exit the sync manager's worker
// records when the pidfd becomes readable. State guarded by objects_lock().
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "palrt/sync/internal/waitable_object.hpp"
#include "palrt/sync/process_handle.hpp"

namespace palrt::sync::internal {

class process_object final : public waitable_object {
 public:
  // Opens a pidfd for `pid`. Throws sync_error: ESRCH (no such process: it exited and was
  // reaped, or never existed), EINVAL (pid <= 0), or the errno of pidfd_open (ENOSYS before
  // Linux 5.3, EMFILE...).
  static std::shared_ptr<process_object> open(pid_t pid);
  ~process_object() override;

  bool signalled_for(const thread_record&) const noexcept override { return exited_; }
  bool acquire(thread_record&) noexcept override { return false; }

  pid_t pid() const noexcept { return pid_; }
  int pidfd() const noexcept { return pidfd_; }

  // Once the pidfd is readable (the process exited): reaps it if it is a child (waitid), then
  // under objects_lock() records the exit and satisfies the waiters. Called by one thread
  // (the sync manager's worker), once.
  void reap_and_signal() noexcept;

  // Under objects_lock().
  bool exited_ = false;
  std::optional<process_exit_status> status_;  // empty after exit: unavailable

 private:
  process_object(pid_t pid, int pidfd) noexcept : pid_(pid), pidfd_(pidfd) {}
  const pid_t pid_;
  const int pidfd_;
};

}  // namespace palrt::sync::internal

#include "palrt/sync/process_handle.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "palrt/sync/internal/process_object.hpp"
#include "palrt/sync/internal/waits_access.hpp"

namespace palrt::sync {
namespace internal {

std::shared_ptr<process_object> process_object::open(pid_t pid) {
  if (pid <= 0) {
    throw sync_error(std::errc::invalid_argument,
                     "open_process: pid " + std::to_string(pid) + " does not name one process");
  }
  // Through syscall(): the glibc wrapper is recent (2.36), the system call is Linux 5.3.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    const int error = errno;
    if (error == ESRCH) {
      throw sync_error(std::errc::no_such_process,
                       "open_process: no process with pid " + std::to_string(pid) +
                           " (it has exited and been reaped, or never existed); its exit status is unavailable");
    }
    throw sync_error(static_cast<std::errc>(error), "open_process: pidfd_open(" + std::to_string(pid) +
                                                       ") failed: " + std::generic_category().message(error));
  }
  return std::shared_ptr<process_object>(new process_object(pid, fd));
}

process_object::~process_object() { ::close(pidfd_); }

void process_object::reap_and_signal() noexcept {
  // The pidfd is readable: the process has exited. A child of ours is a zombie now, and
  // waitid reaps it; for anything else (not our child, or reaped by someone else, or
  // SIGCHLD ignored) there is no status to be had: ECHILD.
  std::optional<process_exit_status> status;
  siginfo_t info{};
  int r;
  do {
    r = ::waitid(P_PIDFD, static_cast<id_t>(pidfd_), &info, WEXITED | WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0 && info.si_pid != 0) {
    if (info.si_code == CLD_EXITED) {
      status = process_exit_status{info.si_status, 0};
    } else {
      status = process_exit_status{0, info.si_status};  // CLD_KILLED, CLD_DUMPED
    }
  }
  wake_list wakes;
  std::lock_guard lock(objects_lock());
  exited_ = true;
  status_ = status;
  satisfy_waiters(wakes);
}

process_handle waits_access::make_process_handle(std::shared_ptr<process_object> p) {
  return process_handle(std::move(p));
}

}  // namespace internal

pid_t process_handle::pid() const {
  return static_cast<internal::process_object&>(object_for("process_handle::pid")).pid();
}

bool process_handle::has_exited() const {
  auto& p = static_cast<internal::process_object&>(object_for("process_handle::has_exited"));
  std::lock_guard lock(internal::objects_lock());
  return p.exited_;
}

process_exit_status process_handle::exit_status() const {
  auto& p = static_cast<internal::process_object&>(object_for("process_handle::exit_status"));
  std::lock_guard lock(internal::objects_lock());
  if (!p.exited_) {
    throw sync_error(std::errc::device_or_resource_busy,
                     "process_handle::exit_status: process " + std::to_string(p.pid()) + " is still running");
  }
  if (!p.status_) {
    throw sync_error(std::errc::no_child_process,
                     "process_handle::exit_status: process " + std::to_string(p.pid()) +
                         " has exited, but its exit status is unavailable: it is not a child of this process, "
                         "or it was reaped by someone else");
  }
  return *p.status_;
}

}  // namespace palrt::sync

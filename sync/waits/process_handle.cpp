// SPDX-License-Identifier: MIT
#include "palrt/sync/process_handle.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <string>

#include "palrt/sync/internal/process_object.hpp"
#include "palrt/sync/internal/waits_access.hpp"

namespace palrt::sync {
namespace internal {
namespace {

// waitid() on a pidfd, retried after EINTR: 0, or -1 with errno.
int waitid_pidfd(int pidfd, siginfo_t& info, int options) noexcept {
  int r;
  do {
    r = ::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, options);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Whether the pidfd names a child of ours that nobody has reaped yet (running or a zombie):
// then its pid cannot have been reused. WNOWAIT: looks without reaping.
bool is_unreaped_child(int pidfd) noexcept {
  siginfo_t info{};
  return waitid_pidfd(pidfd, info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

}  // namespace

// The children palrt opened and has not reaped (see process_object.hpp): an intrusive list
// through the objects, so it allocates nothing and has nothing to destroy at exit (a global
// sync_manager's worker may still reap while the global destructors run). Only open() scans
// it, once per open_process: a linear pass over the children palrt watches and has not
// reaped, which are few next to the cost of starting a process.
class child_registry {
 public:
  static std::mutex& lock() noexcept {
    static std::mutex m;  // function-local, as objects_lock(): usable from any initialiser
    return m;
  }
  // Under lock(): the registered object for `pid` if it is still our unreaped child, else
  // null. Never the last reference to one: an object whose count is already zero (its
  // destructor waits for the lock to unlink it) is skipped.
  static std::shared_ptr<process_object> find(pid_t pid) noexcept {
    for (process_object* p = head_; p; p = p->next_child_) {
      // A child reaped by someone else (against process_handle.hpp's contract) may have had
      // its pid reused: not the same process any more.
      if (p->pid_ != pid || !is_unreaped_child(p->pidfd_)) continue;
      if (std::shared_ptr<process_object> shared = p->weak_from_this().lock()) return shared;
    }
    return nullptr;
  }
  static void add(process_object& p) noexcept {
    p.prev_child_ = nullptr;
    p.next_child_ = head_;
    if (head_) head_->prev_child_ = &p;
    head_ = &p;
    p.registered_ = true;
  }
  static void remove(process_object& p) noexcept {
    if (!p.registered_) return;
    if (p.prev_child_) {
      p.prev_child_->next_child_ = p.next_child_;
    } else {
      head_ = p.next_child_;
    }
    if (p.next_child_) p.next_child_->prev_child_ = p.prev_child_;
    p.prev_child_ = p.next_child_ = nullptr;
    p.registered_ = false;
  }

 private:
  static constinit inline process_object* head_ = nullptr;
};

std::shared_ptr<process_object> process_object::open(pid_t pid) {
  if (pid <= 0) {
    throw sync_error(std::errc::invalid_argument,
                     "open_process: pid " + std::to_string(pid) + " does not name one process");
  }
  // Under the registry's lock from the look-up to the registration, and reap_and_signal()
  // unregisters under it as it reaps: a second open() of one child finds the first one's
  // object until the child is reaped, and its pidfd_open fails with ESRCH after that.
  std::lock_guard lock(child_registry::lock());
  if (std::shared_ptr<process_object> shared = child_registry::find(pid)) return shared;
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
  std::shared_ptr<process_object> object(new process_object(pid, fd));
  // Not our child: nothing to share (nobody here can reap it, every handle reports the
  // status unavailable alike), and its pid may be reused once its parent reaps it.
  if (is_unreaped_child(fd)) child_registry::add(*object);
  return object;
}

process_object::~process_object() {
  // Read without the lock: every write to it happened before our last reference went.
  if (registered_) {
    std::lock_guard lock(child_registry::lock());
    child_registry::remove(*this);
  }
  ::close(pidfd_);
}

void process_object::reap_and_signal() noexcept {
  // The pidfd is readable: the process has exited. A child of ours is a zombie now, and
  // waitid reaps it; for anything else (not our child, or reaped by someone else, or
  // SIGCHLD ignored) there is no status to be had: ECHILD.
  std::optional<process_exit_status> status;
  {
    std::lock_guard lock(child_registry::lock());
    if (reaped_) return;  // another sync manager watching this object did it
    reaped_ = true;
    siginfo_t info{};
    if (waitid_pidfd(pidfd_, info, WEXITED | WNOHANG) == 0 && info.si_pid != 0) {
      if (info.si_code == CLD_EXITED) {
        status = process_exit_status{info.si_status, 0};
      } else {
        status = process_exit_status{0, info.si_status};  // CLD_KILLED, CLD_DUMPED
      }
    }
    child_registry::remove(*this);  // with the reaping, under the same lock (see open())
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

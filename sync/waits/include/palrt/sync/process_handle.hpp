// SPDX-License-Identifier: MIT
// Process handles: signalled when the process exits, with its exit status.
//
// A process handle refers to a process through a pidfd (Linux 5.3+), so it can never refer
// to another process that reused the pid. It is opened by the sync manager
// (sync_manager::open_process), whose worker thread watches the pidfd and, when the process
// exits, reaps it (palrt reaps the children it watches, as CoreCLR's PAL does: do not also
// waitpid() them) and signals the handle. Waiting on it is then like waiting on any other
// object (wait.hpp).
//
// The exit status is known only for a child of this process that palrt reaped. For another
// process (not a child, or a child reaped by someone else first) the handle still becomes
// signalled at exit, but exit_status() says the status is unavailable. Every handle to one
// child, opened before palrt reaped it, through one sync_manager or several, sees its exit
// status: they share one process object, reaped once. Once palrt has reaped a child its pid
// names nothing (open_process throws ESRCH), as after any waitpid().
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <sys/types.h>

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

struct process_exit_status {
  int code = 0;    // the exit code, when signal == 0
  int signal = 0;  // the signal that killed the process, or 0 if it exited
};

class process_handle : public handle {
 public:
  process_handle() noexcept = default;  // closed

  pid_t pid() const;  // throws sync_error(EBADF) on a closed handle
  // Whether the process has exited (and the handle is signalled). Throws EBADF when closed.
  bool has_exited() const;
  // How it exited. Throws sync_error: EBUSY while it still runs; ECHILD when the status is
  // unavailable (not a child of this process, or reaped by someone else); EBADF when closed.
  process_exit_status exit_status() const;

 private:
  friend class internal::waits_access;
  using handle::handle;
};

}  // namespace palrt::sync

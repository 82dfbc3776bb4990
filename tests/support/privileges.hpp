// SPDX-License-Identifier: MIT
// Makes resource limits bite in tests. RLIMIT_NPROC and RLIMIT_MEMLOCK are not enforced for
// root (CAP_SYS_ADMIN / CAP_SYS_RESOURCE / CAP_IPC_LOCK), so a fresh test process running as
// root first becomes `nobody`.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace palrt::testing {

// Sets `resource` to `limit` for this process, first becoming `nobody` when running as root
// (root's capabilities bypass RLIMIT_NPROC and RLIMIT_MEMLOCK). Returns false (and prints
// why) when it cannot. Only for fresh test processes: there is no way back.
inline bool limit_unprivileged(int resource, rlim_t limit) {
  if (::geteuid() == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) {
      std::printf("cannot drop to nobody: %s\n", std::strerror(errno));
      return false;
    }
  }
  rlimit lim{limit, limit};
  if (::setrlimit(resource, &lim) != 0) {
    std::printf("setrlimit: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

// Limits this process's user to `max_tasks` tasks (threads count).
inline bool limit_tasks(rlim_t max_tasks) { return limit_unprivileged(RLIMIT_NPROC, max_tasks); }

}  // namespace palrt::testing

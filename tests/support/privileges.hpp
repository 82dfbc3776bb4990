// Makes resource limits bite in tests. RLIMIT_NPROC is not enforced for root (CAP_SYS_ADMIN /
// CAP_SYS_RESOURCE), so a fresh test process running as root first becomes `nobody`.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace palrt::testing {

// Limits this process's user to `max_tasks` tasks (threads count). Returns false (and
// prints why) when it cannot.
inline bool limit_tasks(rlim_t max_tasks) {
  if (::geteuid() == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) {
      std::printf("cannot drop to nobody: %s\n", std::strerror(errno));
      return false;
    }
  }
  rlimit lim{max_tasks, max_tasks};
  if (::setrlimit(RLIMIT_NPROC, &lim) != 0) {
    std::printf("setrlimit: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace palrt::testing

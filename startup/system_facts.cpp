// SPDX-License-Identifier: MIT
#include "palrt/startup/system_facts.hpp"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace palrt::startup {

int rcu_expedited() noexcept {
  int fd = ::open("/sys/kernel/rcu_expedited", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char c = 0;
  ssize_t n = ::read(fd, &c, 1);
  ::close(fd);
  return n == 1 && (c == '0' || c == '1') ? c - '0' : -1;
}

std::string kernel_release() {
  utsname u{};
  return ::uname(&u) == 0 ? u.release : "unknown";
}

}  // namespace palrt::startup

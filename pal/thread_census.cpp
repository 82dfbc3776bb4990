#include "palrt/pal/thread_census.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace palrt::pal {

int threads_in_process() noexcept {
  // Raw open/read: no allocation, no stdio, safe in the thread factory and after fork.
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strstr(buf, "\nThreads:");
  if (!p) return 0;
  p += std::strlen("\nThreads:");
  while (*p == ' ' || *p == '\t') ++p;
  int count = 0;
  while (*p >= '0' && *p <= '9') count = count * 10 + (*p++ - '0');
  return count;
}

}  // namespace palrt::pal

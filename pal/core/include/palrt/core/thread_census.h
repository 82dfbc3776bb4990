// SPDX-License-Identifier: MIT
/*
 * Counting this process's threads from the kernel's own count, /proc/self/status "Threads:".
 * Shared by pal/ (C++), the preload shim (C, no C++ runtime) and the tests; raw open/read, no
 * allocation, no stdio, so it is safe in a constructor and after fork. One procfs read costs
 * ~15-50 us, so callers keep it off hot paths and off the default startup path.
 */
#ifndef PALRT_CORE_THREAD_CENSUS_H
#define PALRT_CORE_THREAD_CENSUS_H

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads alive in this process, or 0 if /proc is unavailable. */
static inline int palrt_threads_in_process(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = strstr(buf, "\nThreads:");
  if (!p) return 0;
  p += sizeof "\nThreads:" - 1;
  while (*p == ' ' || *p == '\t') ++p;
  int count = 0;
  while (*p >= '0' && *p <= '9') count = count * 10 + (*p++ - '0');
  return count;
}

#ifdef __cplusplus
}
#endif

#endif

/*
 * Counting this process's threads from the kernel's own count, /proc/self/status "Threads:".
 * Shared by pal/ (C++) and the preload shim (C, no C++ runtime); raw open/read, no
 * allocation, no stdio, so it is safe in a constructor and after fork. One procfs read costs
 * ~15 us, so callers keep it off hot paths.
 */
#ifndef PALRT_PAL_INTERNAL_THREAD_CENSUS_H
#define PALRT_PAL_INTERNAL_THREAD_CENSUS_H

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "membarrier_syscall.h"

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

/*
 * Threads alive when `reg` ran, without the ~15-50 us procfs read where the kernel already
 * told us: REGISTER_PRIVATE_EXPEDITED takes its fast path (~1 us) only while the address
 * space has one user, and otherwise waits an RCU grace period (>= ~5 ms here). So a first
 * registration that completed in under 200 us was single-threaded. Anything else (a slow or
 * failed registration, or one whose process was already registered, or a kernel that cannot
 * say so) is counted from /proc. Caveat: with a single CPU online the kernel also takes the
 * fast path, and then 1 may undercount.
 */
static inline int palrt_threads_at_registration(const struct palrt_registration* reg) {
  const int64_t fast_path_bound_ns = 200 * 1000;
  if (reg->error == 0 && reg->already_registered == 0 && reg->duration_ns < fast_path_bound_ns) return 1;
  return palrt_threads_in_process();
}

#ifdef __cplusplus
}
#endif

#endif

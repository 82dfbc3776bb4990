// SPDX-License-Identifier: MIT
/*
 * palrt's one clock for phase timings and reports: CLOCK_MONOTONIC in nanoseconds.
 * Plain C and static inline, so the preload shim (libc only) and the C++ layers share it.
 * CLOCK_MONOTONIC is answered by the vDSO without a syscall, so timing costs ~20 ns.
 */
#ifndef PALRT_CORE_CLOCK_H
#define PALRT_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline int64_t palrt_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifdef __cplusplus
}
#endif

#endif

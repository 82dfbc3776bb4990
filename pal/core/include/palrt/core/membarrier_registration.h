// SPDX-License-Identifier: MIT
/*
 * The one implementation of membarrier registration, shared by pal/ (C++) and the preload
 * shim (C, no C++ runtime). Everything here is static inline so the shim compiles it in
 * without linking libpalrt; nothing here allocates, locks or reads the environment, so it is
 * safe in an ELF constructor and in an interposed pthread_create.
 *
 * Error convention: functions return a value >= 0 on success and -errno on failure, so no
 * caller depends on errno surviving a later libc call.
 */
#ifndef PALRT_CORE_MEMBARRIER_REGISTRATION_H
#define PALRT_CORE_MEMBARRIER_REGISTRATION_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "palrt/core/clock.h"
#include "palrt/core/membarrier_commands.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline long palrt_membarrier_call(int cmd, unsigned flags) {
#ifdef SYS_membarrier
  long r = syscall(SYS_membarrier, cmd, flags, 0);
  return r < 0 ? -(long)errno : r;
#else
  (void)cmd;
  (void)flags;
  return -ENOSYS;
#endif
}

/* What one registration attempt found and did. */
struct palrt_registration {
  uint32_t mask;          /* QUERY result; 0 when QUERY failed (seccomp may deny it) */
  int error;              /* 0, or the errno of the failed step (QUERY or REGISTER) */
  int already_registered; /* GET_REGISTRATIONS said so before REGISTER: 1, 0, or -1 when the
                             kernel cannot tell (before 6.3) */
  int64_t started_ns;     /* CLOCK_MONOTONIC when registration began */
  int64_t duration_ns;    /* QUERY + GET_REGISTRATIONS + REGISTER: ~3 us fast path, ms slow */
};

/*
 * QUERY, then REGISTER_PRIVATE_EXPEDITED if the kernel offers it (with GET_REGISTRATIONS
 * first where the kernel has it, to tell a first registration from a repeated one).
 * Registering an already registered process returns at once, so calling this again is cheap
 * and harmless. Any QUERY failure counts as "unsupported": seccomp filters often deny QUERY.
 */
static inline void palrt_membarrier_register(struct palrt_registration* out) {
  out->started_ns = palrt_monotonic_ns();
  out->already_registered = -1;
  long mask = palrt_membarrier_call(PALRT_MB_CMD_QUERY, 0);
  if (mask < 0) {
    out->mask = 0;
    out->error = (int)-mask;
  } else {
    out->mask = (uint32_t)mask;
    if (!(mask & PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED) || !(mask & PALRT_MB_CMD_PRIVATE_EXPEDITED)) {
      out->error = ENOSYS; /* kernel predates 4.14 or was built without it */
    } else {
      if (mask & PALRT_MB_CMD_GET_REGISTRATIONS) {
        long regs = palrt_membarrier_call(PALRT_MB_CMD_GET_REGISTRATIONS, 0);
        if (regs >= 0) out->already_registered = (regs & PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED) != 0;
      }
      long r = palrt_membarrier_call(PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED, 0);
      out->error = r < 0 ? (int)-r : 0;
    }
  }
  out->duration_ns = palrt_monotonic_ns() - out->started_ns;
}

/*
 * Whether `reg` looks like the kernel's single-threaded fast path: a first registration
 * (GET_REGISTRATIONS said not yet registered) that succeeded in under 200 us. With a second
 * thread alive the kernel waits an RCU grace period (~5-16 ms here) instead of ~1 us.
 *
 * This is an inference from timing, never a thread count, and reports must say so: with
 * /sys/kernel/rcu_expedited=1 the slow path is expedited and can be this fast too, and with
 * one CPU online the kernel takes the fast path whatever the thread count. Callers that need
 * the count read it (palrt_threads_in_process(), ~15-50 us of procfs).
 */
static inline int palrt_registration_looks_fast(const struct palrt_registration* reg) {
  const int64_t fast_path_bound_ns = 200 * 1000;
  return reg->error == 0 && reg->already_registered == 0 && reg->duration_ns < fast_path_bound_ns;
}

#ifdef __cplusplus
}
#endif

#endif

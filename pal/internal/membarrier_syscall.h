/*
 * The one implementation of membarrier registration, shared by pal/ (C++) and the preload
 * shim (C, no C++ runtime). Everything here is static inline so the shim compiles it in
 * without linking libpalrt; nothing here allocates, locks or reads the environment, so it is
 * safe in an ELF constructor and in an interposed pthread_create.
 *
 * Error convention: functions return a value >= 0 on success and -errno on failure, so no
 * caller depends on errno surviving a later libc call.
 */
#ifndef PALRT_PAL_INTERNAL_MEMBARRIER_SYSCALL_H
#define PALRT_PAL_INTERNAL_MEMBARRIER_SYSCALL_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Command values from <linux/membarrier.h>, spelled out so palrt builds against older kernel
 * headers (GET_REGISTRATIONS arrived in 6.3) and compiles the same everywhere. */
enum {
  PALRT_MB_CMD_QUERY = 0,
  PALRT_MB_CMD_GLOBAL = 1 << 0,
  PALRT_MB_CMD_GLOBAL_EXPEDITED = 1 << 1,
  PALRT_MB_CMD_REGISTER_GLOBAL_EXPEDITED = 1 << 2,
  PALRT_MB_CMD_PRIVATE_EXPEDITED = 1 << 3,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4,
  PALRT_MB_CMD_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 5,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 6,
  PALRT_MB_CMD_PRIVATE_EXPEDITED_RSEQ = 1 << 7,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ = 1 << 8,
  PALRT_MB_CMD_GET_REGISTRATIONS = 1 << 9,
};

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

static inline int64_t palrt_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What one registration attempt found and did. */
struct palrt_registration {
  uint32_t mask;           /* QUERY result; 0 when QUERY failed (seccomp may deny it) */
  int error;               /* 0, or the errno of the failed step (QUERY or REGISTER) */
  int already_registered;  /* GET_REGISTRATIONS said so before REGISTER: 1, 0, or -1 when the
                              kernel cannot tell (before 6.3) */
  int64_t started_ns;      /* CLOCK_MONOTONIC when registration began */
  int64_t duration_ns;     /* QUERY + GET_REGISTRATIONS + REGISTER: ~3 us fast path, ms slow */
};

/*
 * QUERY, then REGISTER_PRIVATE_EXPEDITED if the kernel offers it (with GET_REGISTRATIONS
 * first where the kernel has it, to tell a first registration from a repeated one). Registering an already
 * registered process returns at once, so calling this again is cheap and harmless.
 * Any QUERY failure counts as "unsupported": seccomp filters often deny QUERY itself.
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

#ifdef __cplusplus
}
#endif

#endif

// SPDX-License-Identifier: MIT
/*
 * What the preload shim (libpalrt-preload.so) publishes about the registration it did, so a
 * palrt host in the same process can report `registered_by: preload`, and need not count its
 * threads at its own (late, instant) registration. The host finds it with
 * dlsym(RTLD_DEFAULT, PALRT_PRELOAD_INFO_SYMBOL) when it builds a report, and during bootstrap
 * only when its registration found the process registered already; a process without the
 * shim simply finds no symbol.
 */
#ifndef PALRT_STARTUP_INTERNAL_PRELOAD_INFO_H
#define PALRT_STARTUP_INTERNAL_PRELOAD_INFO_H

#include "palrt/core/membarrier_registration.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PALRT_PRELOAD_INFO_SYMBOL "palrt_preload_info"
#define PALRT_PRELOAD_INFO_VERSION 2

enum palrt_preload_state {
  PALRT_PRELOAD_NOT_RUN = 0,  /* constructor has not run and no thread was created yet */
  PALRT_PRELOAD_DISABLED = 1, /* PALRT_PRELOAD=0, false, no or off */
  PALRT_PRELOAD_REGISTERED = 2,
  PALRT_PRELOAD_FAILED = 3, /* registration.error says why */
};

enum palrt_preload_trigger {
  PALRT_PRELOAD_BY_CONSTRUCTOR = 1,
  PALRT_PRELOAD_BY_PTHREAD_CREATE = 2, /* an earlier constructor started a thread first */
};

struct palrt_preload_info {
  uint32_t version; /* PALRT_PRELOAD_INFO_VERSION */
  int state;        /* enum palrt_preload_state */
  int trigger;      /* enum palrt_preload_trigger */
  /* Threads alive when the shim registered, counted from /proc right after registering; 0
   * when not counted (the registration looked fast and nobody asked for the verbose line:
   * the shim keeps procfs off the startup path of every preloaded program). */
  int threads_at_registration;
  /* palrt_registration_looks_fast(): inferred from timing, never a count. */
  int fast_path_inferred;
  struct palrt_registration registration;
};

/* Exported by the shim; returns a pointer to its (immutable once set) record. */
const struct palrt_preload_info* palrt_preload_info(void);

#ifdef __cplusplus
}
#endif

#endif

// SPDX-License-Identifier: MIT
/*
 * palrt-membarrier-state: prints, one `key=value` per line, what the kernel and the preload
 * shim say about this process's membarrier registration. test_preload runs it with and
 * without LD_PRELOAD; it never registers by itself, so whatever it finds registered was done
 * by the shim (or by nothing).
 *
 *   palrt-membarrier-state [--dlopen PATH | --dlopen-after-thread PATH]
 *
 * --dlopen loads PATH (the shim) first. That is how the secure-execution test gets the shim
 * into a setgid process: the loader ignores LD_PRELOAD paths with a slash in secure mode,
 * but the shim's constructor runs the same code whichever way it was loaded.
 * --dlopen-after-thread starts a second thread first, so the shim's registration is a late,
 * multi-threaded one: the kernel's slow path, which the shim must count, not assume.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "palrt/core/membarrier_registration.h"
#include "palrt/startup/internal/preload_info.h"

static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;

static void* wait_for_release(void* arg) {
  pthread_mutex_lock(&hold);
  pthread_mutex_unlock(&hold);
  return arg;
}

int main(int argc, char** argv) {
  pthread_t waiter;
  int after_thread = argc == 3 && strcmp(argv[1], "--dlopen-after-thread") == 0;
  if (after_thread) {
    pthread_mutex_lock(&hold);
    if (pthread_create(&waiter, NULL, wait_for_release, NULL) != 0) return 2;
  }
  if (argc == 3 && (after_thread || strcmp(argv[1], "--dlopen") == 0)) {
    if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
      fprintf(stderr, "palrt-membarrier-state: dlopen %s: %s\n", argv[2], dlerror());
      return 2;
    }
  } else if (argc != 1) {
    fprintf(stderr, "usage: palrt-membarrier-state [--dlopen PATH | --dlopen-after-thread PATH]\n");
    return 2;
  }
  if (after_thread) {
    pthread_mutex_unlock(&hold);
    pthread_join(waiter, NULL);
  }

  printf("at_secure=%lu\n", getauxval(AT_SECURE));
  /* GET_REGISTRATIONS before PRIVATE_EXPEDITED: neither changes the state, but reading the
   * registration first keeps the report about what was there before we looked. */
  printf("registrations=%ld\n", palrt_membarrier_call(PALRT_MB_CMD_GET_REGISTRATIONS, 0));
  printf("private_expedited=%ld\n", palrt_membarrier_call(PALRT_MB_CMD_PRIVATE_EXPEDITED, 0));

  const struct palrt_preload_info* (*info_fn)(void);
  void* sym = dlsym(RTLD_DEFAULT, PALRT_PRELOAD_INFO_SYMBOL);
  memcpy(&info_fn, &sym, sizeof info_fn);
  if (!info_fn) {
    printf("preload=absent\n");
  } else {
    const struct palrt_preload_info* info = info_fn();
    printf("preload=present\n");
    printf("preload_version=%u\n", info->version);
    printf("preload_state=%d\n", info->state);
    printf("preload_trigger=%d\n", info->trigger);
    printf("preload_threads=%d\n", info->threads_at_registration);
    printf("preload_fast_path_inferred=%d\n", info->fast_path_inferred);
    printf("preload_error=%d\n", info->registration.error);
    printf("preload_mask=%u\n", info->registration.mask);
    printf("preload_duration_ns=%lld\n", (long long)info->registration.duration_ns);
  }

  /* Present only when early_thread_lib is loaded: what its constructor's thread saw. */
  const int* ran = dlsym(RTLD_DEFAULT, "palrt_test_early_thread_ran");
  const long* seen = dlsym(RTLD_DEFAULT, "palrt_test_early_thread_private_expedited");
  if (ran && seen) {
    printf("early_thread_ran=%d\n", *ran);
    printf("early_thread_private_expedited=%ld\n", *seen);
  }
  return 0;
}

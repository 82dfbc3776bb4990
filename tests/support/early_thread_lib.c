// SPDX-License-Identifier: MIT
/*
 * libpalrt-test-early-thread.so: a library whose constructor starts (and joins) a thread,
 * the case the shim's pthread_create interposition exists for. Loaded so that its
 * constructor runs before the shim's, it makes the shim register from pthread_create; the
 * thread itself checks, from inside, that the process was already registered when it ran.
 *
 * The results are exported for palrt-membarrier-state to print.
 */
#include <pthread.h>
#include <stddef.h>

#include "palrt/core/membarrier_registration.h"

int palrt_test_early_thread_ran;
/* membarrier(PRIVATE_EXPEDITED) as seen by the thread: 0 when registered, -EPERM when not.
 * Starts as a value the syscall never returns, so "never ran" cannot pass for either. */
long palrt_test_early_thread_private_expedited = 1;

static void* early_thread(void* arg) {
  (void)arg;
  palrt_test_early_thread_private_expedited = palrt_membarrier_call(PALRT_MB_CMD_PRIVATE_EXPEDITED, 0);
  palrt_test_early_thread_ran = 1;
  return NULL;
}

__attribute__((constructor)) static void start_early_thread(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, early_thread, NULL) == 0) pthread_join(thread, NULL);
}

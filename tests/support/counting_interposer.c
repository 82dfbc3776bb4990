// SPDX-License-Identifier: MIT
/*
 * libpalrt-test-counting-interposer.so: another pthread_create interposer, of the kind
 * sanitizers, profilers and tracers preload. It defines pthread_create unversioned, counts
 * every call, and hands the call on the way such libraries do, with dlsym(RTLD_NEXT). The
 * shim shares the chain with it: preloaded in either order, every thread the program starts
 * must pass through both.
 *
 * The count is exported for palrt-thread-starter to print.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

int palrt_test_interposer_calls;

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  __atomic_add_fetch(&palrt_test_interposer_calls, 1, __ATOMIC_RELAXED);
  int (*next)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  void* sym = dlsym(RTLD_NEXT, "pthread_create");
  memcpy(&next, &sym, sizeof next);
  if (!next) return EAGAIN;
  return next(thread, attr, start, arg);
}

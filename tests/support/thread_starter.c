// SPDX-License-Identifier: MIT
/*
 * palrt-thread-starter: a program that starts threads, for running under the shim next to
 * other pthread_create interposers. Built three times: plain, with ThreadSanitizer and with
 * AddressSanitizer (both of which interpose pthread_create themselves).
 *
 *   palrt-thread-starter N            start N threads at once, join them, print
 *                                     "threads=N sum=S" (S = sum of i*i, computed by the
 *                                     threads), and "interposer_calls=K" when
 *                                     libpalrt-test-counting-interposer.so is loaded
 *   palrt-thread-starter --race       one data race between main and a thread, in an order
 *                                     fixed without sleeps, for ThreadSanitizer to report
 *   palrt-thread-starter --use-after-free
 *                                     a thread reads memory it freed, for AddressSanitizer
 *
 * Nothing printed depends on whether the shim is loaded, so a sanitizer build must print the
 * same with and without it. Exit status 0; 2 on bad arguments or a failed pthread_create.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_THREADS = 64 };

static long g_square[MAX_THREADS];

static void* square(void* arg) {
  long i = (long)arg;
  g_square[i] = i * i;
  return NULL;
}

static int start_and_join(long n) {
  pthread_t threads[MAX_THREADS];
  for (long i = 0; i < n; ++i) {
    if (pthread_create(&threads[i], NULL, square, (void*)i) != 0) {
      fprintf(stderr, "palrt-thread-starter: pthread_create failed\n");
      return 2;
    }
  }
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    pthread_join(threads[i], NULL);
    sum += g_square[i];
  }
  printf("threads=%ld sum=%ld\n", n, sum);
  const int* calls = dlsym(RTLD_DEFAULT, "palrt_test_interposer_calls");
  if (calls) printf("interposer_calls=%d\n", __atomic_load_n(calls, __ATOMIC_RELAXED));
  return 0;
}

/* The race: the thread writes g_racy, then main writes it. Main reads the thread's flag with
 * a relaxed load, which orders the two writes in time but gives ThreadSanitizer no
 * happens-before edge (that takes an acquire), so it reports the race, always as main's
 * write with T1's as the previous one, and always while T1 is still running (it waits for
 * main's `done` before returning). */
static int g_racy;
static int g_written;
static int g_done;

static void* racing_writer(void* arg) {
  g_racy = 1;
  __atomic_store_n(&g_written, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&g_done, __ATOMIC_RELAXED)) sched_yield();
  return arg;
}

static int race(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, racing_writer, NULL) != 0) return 2;
  while (!__atomic_load_n(&g_written, __ATOMIC_RELAXED)) sched_yield();
  __atomic_signal_fence(__ATOMIC_SEQ_CST); /* keep the compiler from hoisting the write */
  g_racy = 2;
  __atomic_store_n(&g_done, 1, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  printf("racy=%d\n", g_racy);
  return 0;
}

static void* free_then_read(void* arg) {
  int* volatile p = arg;
  free(p);
  return (void*)(long)p[0];
}

static int use_after_free(void) {
  int* p = malloc(sizeof *p);
  if (!p) return 2;
  *p = 7;
  pthread_t t;
  if (pthread_create(&t, NULL, free_then_read, p) != 0) return 2;
  void* result;
  pthread_join(t, &result);
  printf("read=%ld\n", (long)result);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--race") == 0) return race();
  if (argc == 2 && strcmp(argv[1], "--use-after-free") == 0) return use_after_free();
  char* end = NULL;
  long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
  if (argc != 2 || *end != '\0' || n < 1 || n > MAX_THREADS) {
    fprintf(stderr, "usage: palrt-thread-starter N (1..%d) | --race | --use-after-free\n", MAX_THREADS);
    return 2;
  }
  return start_and_join(n);
}

// SPDX-License-Identifier: MIT
/*
 * palrt-startup-reference: the floor for palrt-startup's startup time.
 *
 * This is the least a process can do and still end up where palrt's bootstrap ends up:
 * membarrier registered while the process has one thread (the kernel's fast path), then the
 * service threads started and joined. Plain C, libc and threads only, no C++ runtime, no palrt.
 *
 *   palrt-startup-reference              one thread: what `palrt-startup` starts (the
 *                                        finalizer; the sync worker is lazy, so never started)
 *   palrt-startup-reference --threads 2  two threads, started and then joined together:
 *                                        what `palrt-startup --sync-worker eager` starts
 *
 * scripts/bench-startup.sh times each beside the palrt-startup row that does the same work;
 * the target is palrt-startup <= 1.35x its floor's median. Everything palrt adds on top (C++
 * runtime start, phase objects, timing, report) has to fit in that margin, so keep this
 * program minimal: adding work here would hide palrt's cost.
 *
 * Exit status: 0 on success; 1 with a one-line message on stderr if membarrier private
 * expedited is unavailable or registration fails, or a thread cannot be started or joined;
 * 2 with a one-line usage message for any other arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int membarrier(int cmd, unsigned int flags, int cpu_id) {
  return (int)syscall(SYS_membarrier, cmd, flags, cpu_id);
}

/* Does nothing observable: the point is only that the threads exist and are joined, as
 * palrt's service threads do. */
static void* idle_thread(void* arg) { return arg; }

int main(int argc, char** argv) {
  /* The only arguments: none, or --threads 1|2. Compared, not parsed: this program's own
   * startup is what is measured. */
  int threads = 1;
  if (argc == 3 && strcmp(argv[1], "--threads") == 0 && (strcmp(argv[2], "1") == 0 || strcmp(argv[2], "2") == 0)) {
    threads = argv[2][0] - '0';
  } else if (argc != 1) {
    fprintf(stderr, "palrt-startup-reference: usage: palrt-startup-reference [--threads 1|2]\n");
    return 2;
  }

  /* QUERY first, as palrt does: registering a command the kernel lacks fails with EINVAL,
   * and a seccomp filter may deny membarrier outright (then QUERY fails too). */
  int mask = membarrier(MEMBARRIER_CMD_QUERY, 0, 0);
  if (mask < 0) {
    fprintf(stderr, "palrt-startup-reference: membarrier QUERY failed: %s\n", strerror(errno));
    return 1;
  }
  if (!(mask & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)) {
    fprintf(stderr,
            "palrt-startup-reference: kernel lacks membarrier "
            "REGISTER_PRIVATE_EXPEDITED (mask 0x%x)\n",
            (unsigned)mask);
    return 1;
  }

  /* Register while this is the only thread: the kernel's fast path (mm_users == 1). */
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
    fprintf(stderr,
            "palrt-startup-reference: membarrier REGISTER_PRIVATE_EXPEDITED "
            "failed: %s\n",
            strerror(errno));
    return 1;
  }

  /* All started before any is joined, as palrt's bootstrap starts its service threads
   * and its shutdown joins them. */
  pthread_t thread[2];
  for (int i = 0; i < threads; i++) {
    int err = pthread_create(&thread[i], NULL, idle_thread, NULL);
    if (err != 0) {
      fprintf(stderr, "palrt-startup-reference: pthread_create failed: %s\n", strerror(err));
      return 1;
    }
  }
  for (int i = 0; i < threads; i++) {
    int err = pthread_join(thread[i], NULL);
    if (err != 0) {
      fprintf(stderr, "palrt-startup-reference: pthread_join failed: %s\n", strerror(err));
      return 1;
    }
  }
  return 0;
}

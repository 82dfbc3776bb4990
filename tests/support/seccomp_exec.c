// SPDX-License-Identifier: MIT
/*
 * palrt-seccomp-exec: run a command with membarrier(2) denied by a seccomp filter.
 *
 *   palrt-seccomp-exec enosys|eperm -- <command...>
 *
 * Containers (Docker's default profile before membarrier was allowed, gVisor, some
 * sandboxes) deny membarrier with ENOSYS or EPERM. palrt must then treat QUERY as failed and
 * fall back to another process-barrier strategy; the 'seccomp' test suite runs palrt's
 * suites under this helper to prove it does.
 *
 * Classic BPF, no libseccomp, so the tests need no extra package. The filter:
 *   - allows everything if the syscall's architecture is not the one this helper was built
 *     for (syscall numbers would mean something else; denying by number would be wrong);
 *   - returns SECCOMP_RET_ERRNO | <errno> for __NR_membarrier;
 *   - allows every other syscall.
 * The filter is inherited across execve and fork, so the whole command tree is covered.
 *
 * Exit status: 2 with a one-line usage on bad arguments; 1 if the filter cannot be
 * installed; 126 if the command cannot be executed, 127 if it is not found (as the shell
 * does); otherwise the command's own exit status (this process becomes the command).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define PALRT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define PALRT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "palrt-seccomp-exec: add this architecture's AUDIT_ARCH_* value"
#endif

static const char usage[] = "usage: palrt-seccomp-exec enosys|eperm -- <command...>\n";

static int install_membarrier_filter(unsigned int denial_errno) {
  struct sock_filter filter[] = {
      /* Wrong architecture: allow (see the header comment). */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PALRT_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* membarrier: deny with the chosen errno; anything else: allow. */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (denial_errno & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {
      .len = (unsigned short)(sizeof filter / sizeof filter[0]),
      .filter = filter,
  };

  /* Required to install a filter without CAP_SYS_ADMIN; also keeps a setuid command from
   * escaping the filter, which is what the kernel wants it for. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    fprintf(stderr, "palrt-seccomp-exec: prctl(PR_SET_NO_NEW_PRIVS) failed: %s\n", strerror(errno));
    return -1;
  }
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) {
    fprintf(stderr, "palrt-seccomp-exec: installing the seccomp filter failed: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fputs(usage, stderr);
    return 2;
  }
  unsigned int denial_errno;
  if (strcmp(argv[1], "enosys") == 0) {
    denial_errno = ENOSYS;
  } else if (strcmp(argv[1], "eperm") == 0) {
    denial_errno = EPERM;
  } else {
    fputs(usage, stderr);
    return 2;
  }

  if (install_membarrier_filter(denial_errno) != 0) return 1;

  char** command = &argv[3];
  execvp(command[0], command);
  int exec_errno = errno;
  fprintf(stderr, "palrt-seccomp-exec: cannot execute %s: %s\n", command[0], strerror(exec_errno));
  return exec_errno == ENOENT ? 127 : 126;
}

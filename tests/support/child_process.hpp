// SPDX-License-Identifier: MIT
// fork()ed children, for tests whose point is what a child inherits from its parent (the
// process barrier's state, its PID namespace): run_fresh() re-executes the test binary, so
// its children inherit nothing. Only for single-threaded (fresh) processes: a child forked
// from a multithreaded one may only call async-signal-safe functions.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

namespace palrt::testing {

// waitpid()'s status as an exit code, the shell's way: the exit status, or 128 + the signal
// that killed the process (then also printed, "killed by signal N").
inline int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::printf("killed by signal %d\n", WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 255;
}

// Runs `fn` in a fork()ed child, which exits with what it returns; returns that (see
// exit_code_of), or -1 when fork() fails. Buffered output is flushed first, so that the child
// does not print it a second time.
inline int run_forked(const std::function<int()>& fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int code = fn();
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return exit_code_of(status);
}

// Runs `fn` in a new PID namespace that still sees this process's /proc, as after
// `unshare --pid --fork` without --mount-proc: /proc lists the ids of the parent namespace,
// not the ones the child has in its own. `fn` runs in a child of the namespace's pid 1: pid 1
// of a namespace ignores every signal it has no handler for (abort()'s SIGABRT included), so
// pid 1 only waits for it and passes its exit code on. Returns that code, or -1 with `denied` set when this
// process may not create PID namespaces (then tests skip).
inline int run_in_new_pid_namespace(const std::function<int()>& fn, std::string& denied) {
  // As root CLONE_NEWPID alone; otherwise a user namespace first grants the capability.
  if (::unshare(CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) {
    denied = std::string("unshare(CLONE_NEWPID): ") + std::strerror(errno);
    return -1;
  }
  return run_forked([&fn] { return run_forked(fn); });
}

}  // namespace palrt::testing

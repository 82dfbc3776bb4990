// SPDX-License-Identifier: MIT
// Running real processes from tests: tools, the shim under real programs, and "fresh
// processes" (this test binary re-executed) for behaviour that is per-process and sticky,
// such as membarrier registration, which a fork()ed child inherits.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace palrt::testing {

struct process_result {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // signal that killed it, 0 if it exited
  bool timed_out = false;
  std::string out;
  std::string err;
};

struct run_options {
  std::vector<std::string> env_add;     // "NAME=value", added to (or replacing in) our environment
  std::vector<std::string> env_remove;  // names removed from the environment
  std::chrono::milliseconds timeout{20000};
};

// posix_spawn + pipes; kills the child with SIGKILL when the timeout passes.
process_result run_process(const std::vector<std::string>& argv, const run_options& opts = {});

// Re-executes this test binary to run the function registered with PALRT_FRESH_PROCESS(name)
// in a brand-new process (one thread, not registered for membarrier).
process_result run_fresh(const std::string& name, const run_options& opts = {});

// Path of a build artefact handed over by meson test through the environment; fails the
// test with a clear message when it is missing.
std::string artefact(const char* env_name);

// Environment for preloading `shim` into a program of this build. Under ASan the runtime
// insists on being first in the library list; the shim is deliberately not instrumented, so
// that check is turned off (the program is still fully checked). TSan needs nothing: the
// shim passes pthread_create on to TSan's own.
std::vector<std::string> preload_env(const std::string& shim);

// Environment for a fresh process that drops privileges (RLIMIT_NPROC tests): LeakSanitizer
// cannot inspect a process after setuid and would turn a clean exit into a failure.
std::vector<std::string> privilege_drop_env();

// Environment for a fresh process that enters a PID namespace whose /proc is not its own:
// LeakSanitizer lists the process's threads from /proc and dies with "fatal error" there.
inline std::vector<std::string> foreign_proc_env() { return privilege_drop_env(); }

using fresh_fn = int (*)();
struct fresh_registrar {
  fresh_registrar(const char* name, fresh_fn fn);
};

}  // namespace palrt::testing

// Defines a function body that runs in a fresh process; its return value is the exit code.
// It may print to stdout for the parent test to assert on.
#define PALRT_FRESH_PROCESS(name)                                                                    \
  static int palrt_fresh_##name();                                                                   \
  static const ::palrt::testing::fresh_registrar palrt_fresh_reg_##name(#name, &palrt_fresh_##name); \
  static int palrt_fresh_##name()

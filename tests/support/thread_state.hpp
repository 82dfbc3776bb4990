// SPDX-License-Identifier: MIT
// Reads a thread's scheduler state from /proc/self/task/<tid>/stat: 'R' running, 'S'
// sleeping (e.g. in FUTEX_WAIT), 'D', 'T', 'Z'... '?' when the thread is gone.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace palrt::testing {

inline char thread_state(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return '?';
  return stat[close + 2];
}

// Threads of this process whose name starts with "palrt-": the ones palrt's services started.
// Tests count these rather than all threads, because a sanitizer runtime adds threads of its
// own (TSan starts one at the process's first pthread_create).
inline int palrt_threads_alive() {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name.rfind("palrt-", 0) == 0;
  }
  return n;
}

// count() once it reads `expected`, or after a bound whatever it reads then. A joined thread
// can still be counted for a moment: pthread_join returns when the exiting thread has cleared
// its tid, shortly before the kernel removes it from /proc/self/task and from "Threads:".
template <class Count>
int count_settled(Count count, int expected) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int n = count();
  while (n != expected && std::chrono::steady_clock::now() < until) {
    sched_yield();
    n = count();
  }
  return n;
}

inline int palrt_threads_alive_settled(int expected) { return count_settled(palrt_threads_alive, expected); }

inline bool thread_exists(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  return in.good();
}

// Waits (bounded) until `done` holds, yielding in between; false if it never did. For
// states only the kernel reports (a thread gone from /proc): never a substitute for an event
// the code under test signals.
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds bound = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    sched_yield();
  }
  return true;
}

}  // namespace palrt::testing

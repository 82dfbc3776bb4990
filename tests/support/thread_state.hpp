// Reads a thread's scheduler state from /proc/self/task/<tid>/stat: 'R' running, 'S'
// sleeping (e.g. in FUTEX_WAIT), 'D', 'T', 'Z'... '?' when the thread is gone.
#pragma once

#include <sys/types.h>

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

inline bool thread_exists(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  return in.good();
}

}  // namespace palrt::testing

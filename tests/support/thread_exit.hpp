// SPDX-License-Identifier: MIT
// A host's thread_local whose destructor runs code during its thread's exit, for the tests
// that palrt's per-thread state (thread records, invoke contexts) still works then. Touched
// before a thread's first use of palrt, it is made first and so destroyed after everything
// palrt made on that thread, in reverse order of construction.
#pragma once

#include <functional>

namespace palrt::testing {

struct runs_at_thread_exit {
  std::function<void()> at_exit;
  ~runs_at_thread_exit() {
    if (at_exit) at_exit();
  }
};

// One per thread; set at_exit before the thread's first wait or invoke.
inline thread_local runs_at_thread_exit host_thread_local;

}  // namespace palrt::testing

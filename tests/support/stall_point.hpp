// SPDX-License-Identifier: MIT
// Stalls one thread, once, at a test hook of the code under test (a function pointer and a
// context the code calls at the point the test wants to hold a thread): the thread arms it
// (stall_here = true) before the call that reaches the hook; the test waits for `paused`,
// acts while the thread is held there, then releases `resume`. Other threads pass through.
#pragma once

#include <semaphore>

namespace palrt::testing {

struct stall_point {
  std::binary_semaphore paused{0}, resume{0};
};

inline thread_local bool stall_here = false;

// The hook: pass it with a stall_point as its context.
inline void stall_hook(void* context) {
  if (!stall_here) return;
  stall_here = false;
  auto* s = static_cast<stall_point*>(context);
  s->paused.release();
  s->resume.acquire();
}

}  // namespace palrt::testing

// SPDX-License-Identifier: MIT
// An auto-reset event on a futex: the wait primitive of palrt's service threads.
//
// set() wakes one waiter, or makes the next wait() return at once; wait() consumes the
// signal, so one set() releases one wait(); set() on an event already signalled does
// nothing (signals coalesce, as with a Win32 auto-reset event). Any number of threads may
// wait and set. Nothing here fails: a futex wait that the kernel interrupts (EINTR) is retried.
// An idle waiter sleeps in the kernel (FUTEX_WAIT) and costs nothing; set() on an event
// nobody waits for is two atomic operations and no syscall.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <chrono>
#include <cstdint>

namespace palrt::pal {

class wake_event {
 public:
  wake_event() = default;
  wake_event(const wake_event&) = delete;
  wake_event& operator=(const wake_event&) = delete;

  void set() noexcept;
  // Consumes a pending signal without blocking; false if there was none.
  [[nodiscard]] bool try_wait() noexcept;
  void wait(std::chrono::nanoseconds stay_awake = std::chrono::nanoseconds::zero()) noexcept;
  // false when the timeout passed without a signal.
  //
  // `stay_awake`: first yield the CPU (sched_yield) for up to this long before sleeping in
  // the kernel. For waits that are known to be short, like a thread start or exit: if this
  // CPU went idle, the wake-up would also have to wake it, which on a virtual machine costs
  // tens of microseconds; and the thread being waited for may be queued on this very CPU,
  // where yielding is what lets it run (spinning would only delay it).
  [[nodiscard]] bool wait_for(std::chrono::nanoseconds timeout,
                              std::chrono::nanoseconds stay_awake = std::chrono::nanoseconds::zero()) noexcept;

 private:
  static constexpr std::uint32_t clear = 0, signalled = 1;
  std::atomic<std::uint32_t> state_{clear};  // the futex word
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace palrt::pal

// An auto-reset event on a futex: the wait primitive of palrt's service threads.
//
// set() wakes one waiter, or makes the next wait() return at once; wait() consumes the
// signal, so one set() releases one wait(); set() on an event already signalled does
// nothing (signals coalesce, as with a Win32 auto-reset event). Any number of threads may
// wait and set.
// An idle waiter sleeps in the kernel (FUTEX_WAIT) and costs nothing; set() on an event
// nobody waits for is two atomic operations and no syscall.
#pragma once

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
  void wait() noexcept;
  // false when the timeout passed without a signal.
  bool wait_for(std::chrono::nanoseconds timeout) noexcept;

 private:
  bool try_consume() noexcept;
  static constexpr std::uint32_t clear = 0, signalled = 1;
  std::atomic<std::uint32_t> state_{clear};  // the futex word
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace palrt::pal

// An auto-reset event on a futex: the wait primitive of palrt's service threads.
//
// set() wakes one waiter, or makes the next wait() return at once; wait() consumes the
// signal. It has one waiter at a time (the thread that owns it); any number of threads may
// set() it. An idle waiter sleeps in the kernel (FUTEX_WAIT) and costs nothing; set() on an
// event nobody waits for is one atomic exchange and no syscall.
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
  static constexpr std::uint32_t clear = 0, signalled = 1, waiting = 2;
  std::atomic<std::uint32_t> state_{clear};
};

}  // namespace palrt::pal

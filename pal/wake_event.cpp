// SPDX-License-Identifier: MIT
#include "palrt/pal/wake_event.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "palrt/pal/internal/futex.hpp"

namespace palrt::pal {
namespace {

using internal::futex_deadline;
using internal::futex_wait;
using internal::futex_wake;

timespec deadline_after(std::chrono::nanoseconds timeout) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long long ns = now.tv_nsec + timeout.count() % 1'000'000'000;
  now.tv_sec += timeout.count() / 1'000'000'000 + ns / 1'000'000'000;
  now.tv_nsec = ns % 1'000'000'000;
  return now;
}

}  // namespace

// The protocol is Dekker-shaped, so both sides use seq_cst: set() stores the signal, then
// reads waiters_; a waiter counts itself in waiters_, then reads the state. At least one of
// them sees the other, so a waiter either finds the signal or is woken by FUTEX_WAKE.

void wake_event::set() noexcept {
  state_.store(signalled, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) != 0) futex_wake(state_, 1);
}

bool wake_event::try_wait() noexcept {
  std::uint32_t expected = signalled;
  // acquire: what the setter wrote before set() is visible after a successful consume.
  return state_.compare_exchange_strong(expected, clear, std::memory_order_acquire, std::memory_order_relaxed);
}

void wake_event::wait(std::chrono::nanoseconds stay_awake) noexcept {
  while (!wait_for(std::chrono::nanoseconds::max(), stay_awake)) {
  }
}

bool wake_event::wait_for(std::chrono::nanoseconds timeout, std::chrono::nanoseconds stay_awake) noexcept {
  if (try_wait()) return true;
  const bool forever = timeout == std::chrono::nanoseconds::max();
  const timespec deadline = forever ? timespec{} : deadline_after(timeout);  // the stay-awake counts
  if (stay_awake > std::chrono::nanoseconds::zero()) {
    const auto until = std::chrono::steady_clock::now() + std::min(stay_awake, timeout);
    do {
      sched_yield();
      if (try_wait()) return true;
    } while (std::chrono::steady_clock::now() < until);
  }
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool consumed = false;
  for (;;) {
    if (state_.load(std::memory_order_seq_cst) == signalled && try_wait()) {
      consumed = true;
      break;
    }
    // An absolute deadline, so that the loop does not stretch the timeout; the wait returns
    // at once if the word is no longer `clear` (a set() raced us). EINTR and spurious
    // wake-ups loop.
    const int err = futex_wait(state_, clear, forever ? std::nullopt : std::optional(futex_deadline::at(deadline)));
    if (err == ETIMEDOUT) {
      consumed = try_wait();  // a set() that landed at the deadline still counts
      break;
    }
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
  return consumed;
}

}  // namespace palrt::pal

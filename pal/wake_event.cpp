#include "palrt/pal/wake_event.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace palrt::pal {
namespace {

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op | FUTEX_PRIVATE_FLAG,
                   value, timeout, nullptr, 0);
}

}  // namespace

void wake_event::set() noexcept {
  // release: whatever the setter wrote before set() is visible to the waiter that consumes
  // the signal with its acquire exchange.
  if (state_.exchange(signalled, std::memory_order_release) == waiting)
    futex(&state_, FUTEX_WAKE, 1, nullptr);
}

void wake_event::wait() noexcept {
  while (!wait_for(std::chrono::nanoseconds::max())) {
  }
}

bool wake_event::wait_for(std::chrono::nanoseconds timeout) noexcept {
  const bool forever = timeout == std::chrono::nanoseconds::max();
  timespec deadline{};
  if (!forever) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    auto total = deadline.tv_nsec + timeout.count() % 1'000'000'000;
    deadline.tv_sec += timeout.count() / 1'000'000'000 + total / 1'000'000'000;
    deadline.tv_nsec = total % 1'000'000'000;
  }
  for (;;) {
    // acquire: pairs with set()'s release.
    std::uint32_t s = state_.exchange(clear, std::memory_order_acquire);
    if (s == signalled) return true;
    // Announce that we sleep; if a set() slipped in between, consume it instead.
    std::uint32_t expected = clear;
    if (!state_.compare_exchange_strong(expected, waiting, std::memory_order_acquire)) continue;
    timespec left{};
    if (!forever) {
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long long ns = (deadline.tv_sec - now.tv_sec) * 1'000'000'000LL + (deadline.tv_nsec - now.tv_nsec);
      if (ns <= 0) {
        // Withdraw the announcement; a set() that raced us leaves `signalled`, which we take.
        expected = waiting;
        if (state_.compare_exchange_strong(expected, clear, std::memory_order_acquire)) return false;
        continue;
      }
      left.tv_sec = ns / 1'000'000'000;
      left.tv_nsec = ns % 1'000'000'000;
    }
    // FUTEX_WAIT's timeout is relative; EAGAIN/EINTR/ETIMEDOUT all loop to recheck the state.
    futex(&state_, FUTEX_WAIT, waiting, forever ? nullptr : &left);
  }
}

}  // namespace palrt::pal

// SPDX-License-Identifier: MIT
// The futex operations palrt uses: waits and wakes on a private (this process only) 32-bit
// word. One place for the raw syscall, so every caller passes the same flags and reads the
// result the same way.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>

namespace palrt::pal::internal {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "the kernel reads the futex word through the atomic's address");

// How long a futex_wait() may sleep: a duration from now, or an instant on CLOCK_MONOTONIC.
struct futex_deadline {
  timespec time;
  bool absolute;  // CLOCK_MONOTONIC instant; otherwise a duration from the call

  static futex_deadline after(timespec duration) noexcept { return {duration, false}; }
  static futex_deadline at(timespec monotonic) noexcept { return {monotonic, true}; }
};

// Sleeps while `word` holds `expected`, until woken or the deadline passes (no deadline:
// until woken). Returns 0 when woken (which may be spurious: callers re-check the word), or
// an errno: EAGAIN (the word no longer held `expected`), ETIMEDOUT, EINTR (a signal handler
// ran; a wait with a deadline is never restarted, whatever SA_RESTART says).
inline int futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::optional<futex_deadline> deadline = std::nullopt) noexcept {
  auto* address = reinterpret_cast<std::uint32_t*>(&word);
  long r;
  if (deadline && deadline->absolute)
    // FUTEX_WAIT_BITSET is the wait whose timeout is an absolute CLOCK_MONOTONIC time (plain
    // FUTEX_WAIT takes a duration); with every bit set it matches every wake.
    r = ::syscall(SYS_futex, address, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, &deadline->time, nullptr,
                  FUTEX_BITSET_MATCH_ANY);
  else
    r = ::syscall(SYS_futex, address, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected, deadline ? &deadline->time : nullptr,
                  nullptr, 0);
  return r == 0 ? 0 : errno;
}

// Wakes up to `count` threads waiting on `word`; returns how many it woke. Async-signal-safe
// (the signal barrier's handler calls it); it may change errno, which handlers restore.
inline int futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
  long r = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count,
                     nullptr, nullptr, 0);
  return r < 0 ? 0 : static_cast<int>(r);
}

}  // namespace palrt::pal::internal

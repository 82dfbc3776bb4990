// SPDX-License-Identifier: MIT
// What tests reach in the thread factory beyond its public API: fault injection, so that the
// unwinding of whoever starts threads can be tested without exhausting real limits (the
// RLIMIT_NPROC tests do that separately).
#pragma once

namespace palrt::pal::internal {

class thread_factory_access {
 public:
  // The start after `successful_starts_first` more successful starts fails with `error`
  // (e.g. EAGAIN) as if the kernel refused the thread. error == 0 disarms.
  static void inject_thread_start_failure(int successful_starts_first, int error) noexcept;
  // true: threads started from now on find no pthread key for their exit event, as in a
  // process that used up PTHREAD_KEYS_MAX, and set it at the end of their body instead.
  static void refuse_exit_key(bool refuse) noexcept;
};

}  // namespace palrt::pal::internal

// Fault injection for the thread factory, for tests only: makes a later start_thread() fail
// as if the kernel refused the thread, so the unwinding of whoever called it can be tested
// without exhausting real limits (the RLIMIT_NPROC test does that separately).
#pragma once

namespace palrt::pal::internal {

// The start after `successful_starts_first` more successful starts fails with `error`
// (e.g. EAGAIN). error == 0 disarms.
void inject_thread_start_failure(int successful_starts_first, int error) noexcept;

}  // namespace palrt::pal::internal

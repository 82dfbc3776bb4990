// SPDX-License-Identifier: MIT
// One turn of a spin-wait, for palrt's spinning waiters (the sync manager's adaptive spin)
// and palrt-bench's thread teams.
#pragma once

namespace palrt::pal::internal {

// Tells the CPU this is a spin loop: on x86 `pause` (lets a hyper-thread sibling run, and
// avoids the memory-order mis-speculation when the awaited store arrives).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace palrt::pal::internal

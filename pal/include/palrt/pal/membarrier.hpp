// membarrier(2), the kernel's process-wide memory barrier, with errors that say why.
//
// PRIVATE_EXPEDITED makes every running thread of this process execute a full barrier by
// IPI (~0.6 us when no other thread runs, ~13 us per busy CPU on 2-vCPU virtual machines),
// but only after the process registered with
// REGISTER_PRIVATE_EXPEDITED. Registration is cheap (~1 us) while the process has one
// thread; with a second thread alive the kernel waits a full RCU grace period (~16 ms on
// 2-core machines). That asymmetry is why palrt registers before it starts any thread.
//
// These are thin, allocation-free wrappers; process_barrier.hpp builds the strategy on them.
#pragma once

#include <cstdint>
#include <string_view>

namespace palrt::pal::membarrier {

// Bits of the QUERY mask (values from <linux/membarrier.h>).
inline constexpr std::uint32_t cmd_private_expedited = 1u << 3;
inline constexpr std::uint32_t cmd_register_private_expedited = 1u << 4;
inline constexpr std::uint32_t cmd_get_registrations = 1u << 9;

// Why a membarrier call failed, from its errno.
enum class failure_reason {
  none,            // it succeeded
  not_supported,   // ENOSYS: kernel built without membarrier, or a filter answered ENOSYS
  invalid,         // EINVAL: command unknown to this kernel, or bad flags
  denied,          // EPERM: seccomp denied it, or PRIVATE_EXPEDITED before registration
  other,           // anything else; the errno is kept
};

failure_reason reason_of(int error) noexcept;
// A short readable explanation, e.g. "EPERM: denied (seccomp) or not registered".
std::string_view describe(int error) noexcept;

// Result of one call: the syscall's return value, or the errno it failed with.
struct result {
  long value = 0;  // >= 0 when ok()
  int error = 0;   // errno, 0 on success
  bool ok() const noexcept { return error == 0; }
  failure_reason reason() const noexcept { return reason_of(error); }
};

// Raw call; exposed for tests and the raw-membarrier benchmark baseline.
result call(int command, unsigned flags = 0) noexcept;

// QUERY. Any failure (including seccomp's) means "no command available": returns 0.
std::uint32_t supported_mask() noexcept;
result register_private_expedited() noexcept;
result private_expedited() noexcept;
// GET_REGISTRATIONS (Linux 6.3+): the mask of commands this process registered for.
// EINVAL on older kernels.
result get_registrations() noexcept;

}  // namespace palrt::pal::membarrier

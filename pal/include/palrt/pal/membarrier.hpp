// SPDX-License-Identifier: MIT
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
// None of them throws: each returns the errno it failed with.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstdint>
#include <string_view>

#include "palrt/core/membarrier_commands.h"

namespace palrt::pal::membarrier {

// Bits of the QUERY and GET_REGISTRATIONS masks (the one definition is the C enum in
// palrt/core/membarrier_commands.h, shared with the preload shim).
inline constexpr std::uint32_t cmd_private_expedited = PALRT_MB_CMD_PRIVATE_EXPEDITED;
inline constexpr std::uint32_t cmd_register_private_expedited = PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED;
inline constexpr std::uint32_t cmd_get_registrations = PALRT_MB_CMD_GET_REGISTRATIONS;

// The kernel's name of one command bit ("PRIVATE_EXPEDITED"), or "" for a bit palrt does not
// know. Bits 0 .. PALRT_MB_CMD_BITS - 1 are known.
std::string_view command_name(std::uint32_t bit) noexcept;

// Why a membarrier call failed, from its errno.
enum class failure_reason {
  none,           // it succeeded
  not_supported,  // ENOSYS: kernel built without membarrier, or a filter answered ENOSYS
  invalid,        // EINVAL: command unknown to this kernel, or bad flags
  denied,         // EPERM: seccomp denied it, or PRIVATE_EXPEDITED before registration
  other,          // anything else; the errno is kept
};

failure_reason reason_of(int error) noexcept;
// A short readable explanation, e.g. "EPERM: denied (seccomp) or not registered".
std::string_view describe(int error) noexcept;

// Result of one call: the syscall's return value, or the errno it failed with: the only sign
// that a call failed, so it must not be dropped.
struct [[nodiscard]] result {
  long value = 0;  // >= 0 when ok()
  int error = 0;   // errno, 0 on success
  bool ok() const noexcept { return error == 0; }
  failure_reason reason() const noexcept { return reason_of(error); }
};

// QUERY: value is the mask of supported commands. Any failure (ENOSYS; EPERM or another
// errno from a seccomp filter, which often denies QUERY itself) means no command may be used;
// the errno says why.
result query() noexcept;
// REGISTER_PRIVATE_EXPEDITED. EINVAL where the kernel lacks the command, EPERM under seccomp.
result register_private_expedited() noexcept;
// PRIVATE_EXPEDITED. EPERM before registration (or under seccomp).
result private_expedited() noexcept;
// GET_REGISTRATIONS (Linux 6.3+): value is the mask of commands this process registered
// for. EINVAL on older kernels.
result get_registrations() noexcept;

}  // namespace palrt::pal::membarrier

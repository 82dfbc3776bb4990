// SPDX-License-Identifier: MIT
#include "palrt/pal/membarrier.hpp"

#include <cerrno>

#include "palrt/core/membarrier_registration.h"

namespace palrt::pal::membarrier {
namespace {

result call(int command) noexcept {
  long r = palrt_membarrier_call(command, 0);
  if (r < 0) return {0, static_cast<int>(-r)};
  return {r, 0};
}

}  // namespace

std::string_view command_name(std::uint32_t bit) noexcept {
  switch (bit) {
    case PALRT_MB_CMD_GLOBAL: return "GLOBAL";
    case PALRT_MB_CMD_GLOBAL_EXPEDITED: return "GLOBAL_EXPEDITED";
    case PALRT_MB_CMD_REGISTER_GLOBAL_EXPEDITED: return "REGISTER_GLOBAL_EXPEDITED";
    case PALRT_MB_CMD_PRIVATE_EXPEDITED: return "PRIVATE_EXPEDITED";
    case PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED: return "REGISTER_PRIVATE_EXPEDITED";
    case PALRT_MB_CMD_PRIVATE_EXPEDITED_SYNC_CORE: return "PRIVATE_EXPEDITED_SYNC_CORE";
    case PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: return "REGISTER_PRIVATE_EXPEDITED_SYNC_CORE";
    case PALRT_MB_CMD_PRIVATE_EXPEDITED_RSEQ: return "PRIVATE_EXPEDITED_RSEQ";
    case PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: return "REGISTER_PRIVATE_EXPEDITED_RSEQ";
    case PALRT_MB_CMD_GET_REGISTRATIONS: return "GET_REGISTRATIONS";
    default: return "";
  }
}

failure_reason reason_of(int error) noexcept {
  switch (error) {
    case 0: return failure_reason::none;
    case ENOSYS: return failure_reason::not_supported;
    case EINVAL: return failure_reason::invalid;
    case EPERM: return failure_reason::denied;
    default: return failure_reason::other;
  }
}

std::string_view describe(int error) noexcept {
  switch (error) {
    case 0: return "ok";
    case ENOSYS: return "ENOSYS: membarrier not available (kernel or seccomp filter)";
    case EINVAL: return "EINVAL: command not supported by this kernel";
    case EPERM: return "EPERM: denied by seccomp, or process not registered";
    case ENOMEM: return "ENOMEM: kernel out of memory";
    default: return "unexpected errno from membarrier";
  }
}

result query() noexcept { return call(PALRT_MB_CMD_QUERY); }

result register_private_expedited() noexcept { return call(PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED); }

result private_expedited() noexcept { return call(PALRT_MB_CMD_PRIVATE_EXPEDITED); }

result get_registrations() noexcept { return call(PALRT_MB_CMD_GET_REGISTRATIONS); }

}  // namespace palrt::pal::membarrier

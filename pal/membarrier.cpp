#include "palrt/pal/membarrier.hpp"

#include <cerrno>

#include "internal/membarrier_syscall.h"

namespace palrt::pal::membarrier {

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

result call(int command, unsigned flags) noexcept {
  long r = palrt_membarrier_call(command, flags);
  if (r < 0) return {0, static_cast<int>(-r)};
  return {r, 0};
}

std::uint32_t supported_mask() noexcept {
  result r = call(PALRT_MB_CMD_QUERY);
  return r.ok() ? static_cast<std::uint32_t>(r.value) : 0;
}

result register_private_expedited() noexcept {
  return call(PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED);
}

result private_expedited() noexcept { return call(PALRT_MB_CMD_PRIVATE_EXPEDITED); }

result get_registrations() noexcept { return call(PALRT_MB_CMD_GET_REGISTRATIONS); }

}  // namespace palrt::pal::membarrier

// What this kernel, and any seccomp filter around the test, offers: tests choose their
// expectations from it instead of assuming a kernel (the seccomp variants deny membarrier).
#pragma once

#include <cstdint>

#include "palrt/pal/membarrier.hpp"

namespace palrt::testing {

inline bool membarrier_available() {
  namespace mb = palrt::pal::membarrier;
  const auto query = mb::query();
  const auto mask = static_cast<std::uint32_t>(query.value);
  return query.ok() && (mask & mb::cmd_private_expedited) && (mask & mb::cmd_register_private_expedited);
}

}  // namespace palrt::testing

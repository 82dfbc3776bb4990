// What this kernel, and any seccomp filter around the test, offers: tests choose their
// expectations from it instead of assuming a kernel (the seccomp variants deny membarrier).
#pragma once

#include "palrt/pal/membarrier.hpp"

namespace palrt::testing {

inline bool membarrier_available() {
  namespace mb = palrt::pal::membarrier;
  const auto mask = mb::supported_mask();
  return (mask & mb::cmd_private_expedited) && (mask & mb::cmd_register_private_expedited);
}

}  // namespace palrt::testing

// SPDX-License-Identifier: MIT
// What this kernel, and any seccomp filter around the test, offers: tests choose their
// expectations from it instead of assuming a kernel (the seccomp variants deny membarrier).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>

#include "palrt/pal/membarrier.hpp"

namespace palrt::testing {

inline bool membarrier_available() {
  namespace mb = palrt::pal::membarrier;
  const auto query = mb::query();
  const auto mask = static_cast<std::uint32_t>(query.value);
  return query.ok() && (mask & mb::cmd_private_expedited) && (mask & mb::cmd_register_private_expedited);
}

// Marks a test case whose outcome depends on membarrier_available(): the ones that check how
// palrt falls back where membarrier is denied, TEST_CASE("..." * palrt::testing::fallback_case).
// The seccomp variants of the suites (tests/meson.build) run only these (--test-suite=fallback)
// with membarrier denied; the default run has them all, the rest included.
inline const doctest::test_suite fallback_case{"fallback"};

}  // namespace palrt::testing

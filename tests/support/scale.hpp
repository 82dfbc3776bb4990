// SPDX-License-Identifier: MIT
// Iteration counts for concurrency tests. The default run keeps them small enough for CI's
// default step; the `slow` suite (meson -Dslow_tests=true, scripts/test.sh --slow) runs the
// same tests with PALRT_TEST_SCALE=N, multiplying iterations and time budgets by N.
#pragma once

#include <cstdlib>

namespace palrt::testing {

inline long scale() {
  const char* s = std::getenv("PALRT_TEST_SCALE");
  long n = s ? std::atol(s) : 1;
  return n > 0 ? n : 1;
}

}  // namespace palrt::testing

// SPDX-License-Identifier: MIT
// palrt-bench's `disturbed` verdict (tools/palrt-bench/bench_disturbance.hpp): a wall figure
// and its CPU-timed twin that differ by more than 10% of the larger. A pure function, checked
// here on numbers, so the verdict a reader of the JSON relies on does not depend on how busy
// the test machine is. test_cli.cpp checks that the tool's JSON carries it.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "bench_disturbance.hpp"

using palrt::bench::is_disturbed;

TEST_CASE("bench disturbance: equal clocks are not disturbed, whatever the figure's size") {
  for (const double v : {1e-3, 0.5, 3.2, 100.0, 17e6}) {
    CAPTURE(v);
    CHECK_FALSE(is_disturbed(v, v));
  }
}

TEST_CASE("bench disturbance: exactly 10% of the larger is not disturbed, just beyond it is") {
  // A time per op: the CPU-timed twin is smaller when others took the CPUs.
  CHECK_FALSE(is_disturbed(100.0, 90.0));
  CHECK(is_disturbed(100.0, 89.99));
  CHECK_FALSE(is_disturbed(1000.0, 900.0));
  CHECK(is_disturbed(1000.0, 899.0));
  CHECK_FALSE(is_disturbed(1.0, 0.9));  // 0.9 is not exact in binary: still on the boundary's safe side
  // A rate: the twin is larger. The same 10% of the larger.
  CHECK_FALSE(is_disturbed(90.0, 100.0));
  CHECK(is_disturbed(89.99, 100.0));
  // 10% of the larger, not of the wall figure: 100 against 110 is 9.1% of 110.
  CHECK_FALSE(is_disturbed(100.0, 110.0));
  CHECK(is_disturbed(100.0, 111.2));
}

TEST_CASE("bench disturbance: a time per op and the same run's rate get the same verdict") {
  // A run whose threads had their CPUs for `share` of the wall time: 1000 ops in 2 ms.
  for (const double share : {1.0, 0.95, 0.905, 0.895, 0.8, 0.5, 0.26}) {
    CAPTURE(share);
    const double wall_ns = 2e6, cpu_ns = wall_ns * share, ops = 1000;
    const bool as_time = is_disturbed(wall_ns / ops, cpu_ns / ops);
    const bool as_rate = is_disturbed(ops * 1e9 / wall_ns, ops * 1e9 / cpu_ns);
    CHECK(as_time == as_rate);
    CHECK(as_time == (share < 0.9));
  }
}

TEST_CASE("bench disturbance: a figure that cannot be compared counts as disturbed") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(is_disturbed(nan, 1.0));
  CHECK(is_disturbed(1.0, nan));
  CHECK(is_disturbed(inf, 1.0));
  CHECK(is_disturbed(1.0, inf));
  CHECK(is_disturbed(0.0, 1.0));  // a run that measured nothing
  CHECK(is_disturbed(1.0, 0.0));  // a CPU clock that did not advance
  CHECK(is_disturbed(-1.0, -1.0));
}

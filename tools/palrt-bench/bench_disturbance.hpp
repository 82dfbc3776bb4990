// SPDX-License-Identifier: MIT
// When a palrt-bench figure is `disturbed`: its wall-clock value and the same value timed by
// the CPU clocks of the threads that ran it differ by more than 10%.
//
// Why the two differ. A thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, bench_cpu_clock.hpp)
// advances only while the thread runs on a CPU: not while another process's thread holds its
// CPU, not while it sleeps, and not while the hypervisor has taken the vCPU where the
// hypervisor reports steal time to the guest (CONFIG_PARAVIRT_TIME_ACCOUNTING; the VMs of
// docs/BENCHMARKS.md report none, so there the time a host takes from a vCPU still counts as
// the thread's). A figure timed by the threads' CPU clocks (timed_run::cpu,
// bench_timing.hpp) is, for threads that work independently, what the run would have read had
// nothing else taken their CPUs (a neighbour that slows them without taking a CPU, through
// the caches or an SMT sibling, moves both clocks alike and goes unseen): on these shared
// 2-vCPU machines, `palrt-bench handles` once read a 2-thread/1-thread ratio of 0.26x by the
// wall clock where the threads' CPU clocks gave 1.96x. So a wall figure far from its CPU-timed
// twin was measured while something else ran, and is noise, not a regression; one close to
// it is the run's own. The other way round, a variant that waits by design (a mutex that
// sleeps, a caller blocked on a condition variable) has CPU time below its wall time with
// nothing else running: its rows read disturbed in every run, and the flag says nothing
// about them (docs/BENCHMARKS.md, "Disturbed runs", lists them).
//
// Why 10% of the larger. The rows come as times per op (ns_per_op: smaller is better) and as
// rates (ops_per_s: larger is better), and the CPU-timed twin of a rate is the reciprocal
// form of the same measurement: ops / wall time against ops / CPU time. Measured against the
// larger of the two, the difference is 1 - smaller/larger, and smaller/larger does not change
// when both figures are inverted, so a run is disturbed or not whichever way its figure is
// written: a thread that ran 85% of the wall time reads 15% in both forms. (Against the wall
// figure, the same run would read 15% as a time and 17.6% as a rate.) 10% is beyond what
// the two differ by in figures nothing disturbed (0.3-6% in docs/BENCHMARKS.md's runs: a
// team's start skew, the slices' ends, the clock reads) and well inside what one other busy
// process on a 2-vCPU machine costs (up to half of a thread's time).
//
// Pure, header-only and free of palrt: tests/test_bench_disturbance.cpp checks it, the
// boundary included, without running a benchmark.
#pragma once

#include <algorithm>
#include <cmath>

namespace palrt::bench {

// The threshold, as a whole percentage so that the comparison below is exact for exact
// inputs (0.10 has no exact binary form; 10 and 100 do).
inline constexpr int disturbed_percent = 10;

// True if the wall figure and its CPU-timed twin differ by more than disturbed_percent of the
// larger of the two; exactly 10% is not disturbed. A figure that is not a positive finite
// number on either side cannot be compared, and counts as disturbed: nothing vouches for it.
inline bool is_disturbed(double wall_figure, double cpu_figure) noexcept {
  if (!std::isfinite(wall_figure) || !std::isfinite(cpu_figure) || wall_figure <= 0.0 || cpu_figure <= 0.0) return true;
  const double larger = std::max(wall_figure, cpu_figure);
  const double smaller = std::min(wall_figure, cpu_figure);
  return (larger - smaller) * 100.0 > static_cast<double>(disturbed_percent) * larger;
}

}  // namespace palrt::bench

// SPDX-License-Identifier: MIT
// Timing rules every palrt-bench component measures by.
//
// The machines are noisy (shared 2-core VMs), so one number per variant is never one run:
// each variant is sampled in R repetitions and the median reported, and all variants are
// interleaved within each repetition in 1 ms slices, in shuffled order, so a slow stretch of
// the machine lands on every variant instead of on whichever happened to run then. Every variant goes through the same
// loop (run_for), so a ratio compares the operations, not the loops around them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_cpu_clock.hpp"

namespace palrt::bench {

// Monotonic, unaffected by clock adjustments; vDSO-backed, so ~20 ns to read.
using bench_clock = std::chrono::steady_clock;

// One timed run: its operations, its wall time, and the same stretch by the CPU clocks of the
// threads that ran it, so that every figure has a CPU-timed twin (bench_disturbance.hpp says
// what comparing the two tells).
//
// How `cpu` is derived, so that the twin is comparable with the wall figure. A run of T
// threads on K CPUs (T = K = 1 for run_for; thread_team::cpus_used() for a team) reports
// `elapsed` = E, the wall time from the first thread's start to the last one's end, and ops
// = N, the operations of all of them; its figure is E / N (DESIGN.md's ns_per_op: perfect
// 2-thread scaling halves it). `cpu` is the threads' CPU time per CPU they occupied,
// c = (c_1 + ... + c_T) / K, and the twin is c / N:
//   - undisturbed, the K CPUs are busy with the run's threads for the whole run, so c_1 + ...
//     + c_T = K x E, c = E, and the twin equals the figure. Each CPU lost to something else
//     (another process, a CPU left idle) is missing from c and not from E;
//   - threads that work independently do ops at a rate r per CPU-ns each, so N = r x (c_1 +
//     ... + c_T) and c / N = 1 / (r K): the figure the run would have read had its K CPUs been
//     its own all along, however unevenly others took time from its threads;
//   - where every thread has a CPU of its own (K = T, most cases), c is the threads' mean CPU
//     time. Where threads share CPUs by design (invoke's callers at --threads 2 on two CPUs,
//     two busy threads on the barrier's one load CPU, a team larger than nproc), the mean
//     would read every run as disturbed; the sum per CPU does not. The plain sum would not be
//     a time but a cost (T x E undisturbed): retire's cpu_ns_per_op and invoke's
//     worker_cpu_ns_per_op report costs.
// A rate (ops_per_s) is N / E and its twin N / c. A thread that waits by design (sleeps on a
// mutex, parks) leaves its CPU idle with nothing else running: its twin is no estimate of
// anything, and its rows read disturbed whatever the machine does.
struct timed_run {
  std::uint64_t ops = 0;
  std::chrono::nanoseconds elapsed{0};
  std::chrono::nanoseconds cpu{0};  // the threads' CPU time per CPU they occupied; see above

  double ns_per_op() const noexcept {
    return ops == 0 ? 0.0 : static_cast<double>(elapsed.count()) / static_cast<double>(ops);
  }
  double cpu_ns_per_op() const noexcept {
    return ops == 0 ? 0.0 : static_cast<double>(cpu.count()) / static_cast<double>(ops);
  }
};

// Times one region of the calling thread by both clocks: every timed region of palrt-bench
// starts one, so that every wall figure has its CPU-timed twin. The CPU clock is read before
// the wall clock at the start and after it at the end: the wall time, which the figure
// reports, holds none of the two system calls (~1.5 us of CPU each, bench_cpu_clock.hpp), so
// the figures read as they did before they had twins; the CPU time holds the end of the first
// and the start of the second, which cpu_clock_read_cost() measured and stop() takes off.
class stopwatch {
 public:
  stopwatch() : cpu_start_(read_cost_then_cpu_time()), wall_start_(bench_clock::now()) {}

  bench_clock::time_point started() const noexcept { return wall_start_; }

  // The region so far, with `ops` operations: this thread's wall time and CPU time.
  timed_run stop(std::uint64_t ops) const {
    const std::chrono::nanoseconds wall = bench_clock::now() - wall_start_;
    const std::chrono::nanoseconds cpu = this_thread_cpu_time() - cpu_start_ - cpu_clock_read_cost();
    return {ops, wall, std::max(cpu, std::chrono::nanoseconds::zero())};
  }

 private:
  // The first stopwatch of the process measures the reads' cost here, before its region.
  static std::chrono::nanoseconds read_cost_then_cpu_time() {
    (void)cpu_clock_read_cost();
    return this_thread_cpu_time();
  }

  std::chrono::nanoseconds cpu_start_;  // before wall_start_: read first
  bench_clock::time_point wall_start_;
};

// Calls op() on the calling thread, over and over, for about `budget` of wall time.
//
// The clock is read once per batch rather than once per call, and the batch doubles until one
// batch takes at least 20 us: a 20 ns clock read then costs under 0.1% of the time even for a
// 5 ns op, and the run overshoots its budget by at most one batch (~40 us; one call, if a
// single call is slower than that). The thread's CPU clock is read at the run's two ends only,
// outside its wall time (stopwatch).
template <class Op>
timed_run run_for(std::chrono::nanoseconds budget, Op&& op) {
  constexpr std::chrono::nanoseconds min_batch_time = std::chrono::microseconds(20);
  constexpr std::uint64_t max_batch = std::uint64_t{1} << 20;
  std::uint64_t batch = 1;
  std::uint64_t ops = 0;
  const stopwatch timer;
  const auto start = timer.started();
  auto batch_start = start;
  for (;;) {
    for (std::uint64_t i = 0; i < batch; ++i) op();
    ops += batch;
    const auto now = bench_clock::now();
    if (now - start >= budget) return timer.stop(ops);
    if (now - batch_start < min_batch_time && batch < max_batch) batch *= 2;
    batch_start = now;
  }
}

// The median of the samples (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  const std::size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid), samples.end());
  const double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  const double lower = *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

struct sample_spread {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};

// Median and range, for the progress lines: a wide range says the machine was noisy.
inline sample_spread spread_of(const std::vector<double>& samples) {
  if (samples.empty()) return {};
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  return {median(samples), *lo, *hi};
}

// One contender in a comparison.
struct measured_variant {
  std::string name;  // "palrt" or the baseline's name
  // Runs the variant's operation for about `budget` of wall time (through run_for).
  std::function<timed_run(std::chrono::nanoseconds budget)> run;
};

// The slice the interleaving works in. Noise on these machines comes in stretches (a
// neighbour's build, the hypervisor), so variants alternate every millisecond and each sees
// the same stretches. An A/A check (the same syscall as two variants, load average ~3 on 2
// CPUs) agreed within ~6% with 1 ms slices and only within ~18% with 10 ms slices. Switching
// costs one std::function call and a few clock reads per slice (~0.01%).
inline constexpr std::chrono::nanoseconds interleave_slice = std::chrono::milliseconds(1);

// One variant's figures, one per repetition: by the wall clock, and their CPU-timed twins
// (timed_run::cpu). The caller reports the median of each.
struct variant_samples {
  std::vector<double> wall;  // ns_per_op
  std::vector<double> cpu;   // the same by the threads' CPU clocks (cpu_ns_per_op)
};

// Measures every variant in `repetitions` repetitions of about `budget` each and returns one
// ns_per_op per repetition, and its CPU-timed twin, indexed like `variants`; the caller
// reports the medians.
//
// A repetition is not one stretch per variant: it is cut into slices, and within each slice
// every variant runs once, so drift (frequency, thermal, a noisy neighbour) lands on all
// variants alike. Each slice gives wall time / ops, and the repetition's value is the median
// of its slices. On these VMs the cost of an op switches between regimes within milliseconds
// (a membarrier IPI costs ~0.6 us while the target vCPU runs and tens of us while the host
// has descheduled it), and a tight loop does most of its ops in the fast regime; the median
// of slices weighs time, not ops, which is also what a caller flushing at a random moment
// pays. In an A/A check (raw-membarrier measured twice as two variants, 2 vCPUs under load)
// all time / all ops per repetition agreed within ~20%, the median of 1 ms slices within ~3%.
//
// The order within each slice is a fresh random permutation, so on average every variant runs
// before and after every other equally often, across slice boundaries too. A rotation is not
// enough: it puts the same neighbour in front of a variant in most slices, and on these VMs
// that biased the result (palrt, which makes the same syscall as raw-membarrier, came out
// 1.0-2.2x raw-membarrier with a rotation and 0.9-1.14x with a shuffle). The seed is fixed, so
// two runs use the same orders.
//
// A warm-up round at a tenth of the budget comes first and is discarded: it pays for first
// touches (page faults, lazy binding, a strategy's first signal delivery) and shows the slowest
// op. A slice is never shorter than that op (a 5 ms signal barrier cannot run in 1 ms slices),
// so every variant keeps to about `budget` per repetition.
//
// `min_slice` is for a variant whose run has a fixed cost of its own besides its ops (palrt-bench
// retire drains liburcu's call_rcu worker, which sleeps 10 ms between batches, at the end of
// every run): slices at least that long keep the fixed cost small beside the ops. A min_slice
// of `budget` or more makes each repetition one run per variant, still in shuffled order.
//
// The CPU-timed twin goes the same way: each slice's cpu_ns_per_op, the median of the slices
// per repetition. So the two medians compare the figure as reported: a minority of slices
// that others disturbed moves neither, and the run is not marked for them.
inline std::vector<variant_samples> sample_ns_per_op_interleaved(
    const std::vector<measured_variant>& variants, int repetitions, std::chrono::nanoseconds budget,
    std::chrono::nanoseconds min_slice = interleave_slice) {
  const std::size_t n = variants.size();
  std::vector<variant_samples> samples(n);
  if (n == 0) return samples;
  std::chrono::nanoseconds slice = min_slice;
  for (const auto& v : variants) {
    const timed_run warm_up = v.run(budget / 10);
    slice = std::max(slice, std::chrono::nanoseconds(static_cast<std::int64_t>(warm_up.ns_per_op())));
  }

  const std::int64_t slices = std::max<std::int64_t>(1, budget / slice);
  const std::chrono::nanoseconds slice_budget = budget / slices;
  std::minstd_rand shuffler(0x9a17);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (int rep = 0; rep < repetitions; ++rep) {
    std::vector<variant_samples> slice_figures(n);
    for (std::int64_t s = 0; s < slices; ++s) {
      std::shuffle(order.begin(), order.end(), shuffler);
      for (const std::size_t i : order) {
        const timed_run r = variants[i].run(slice_budget);
        slice_figures[i].wall.push_back(r.ns_per_op());
        slice_figures[i].cpu.push_back(r.cpu_ns_per_op());
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      samples[i].wall.push_back(median(std::move(slice_figures[i].wall)));
      samples[i].cpu.push_back(median(std::move(slice_figures[i].cpu)));
    }
  }
  return samples;
}

}  // namespace palrt::bench

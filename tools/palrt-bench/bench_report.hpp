// SPDX-License-Identifier: MIT
// The one output format of palrt-bench (DESIGN.md, "Performance").
//
// A component adds one result per {case, variant, threads, metric}; the tool then prints
// either a table for people (one row per case/metric/threads, one column per variant, then a
// palrt/baseline ratio column per baseline) or, with --json, exactly one JSON object for
// scripts:
//
//   {"component": "barrier",
//    "machine": {"nproc": 2, "kernel": "6.1.0", "barrier_strategy": "membarrier"},
//    "results": [{"case": "flush", "variant": "palrt", "threads": 1,
//                 "metric": "ns_per_op", "value": 612.3,
//                 "cpu_value": 598.0, "disturbed": false}, ...]}
//
// `cpu_value` is the figure's CPU-timed twin: the same figure with the wall time replaced by
// the CPU time of the threads that ran per CPU they occupied (bench_timing.hpp's timed_run),
// on the rows whose value is a time per op or a rate. `disturbed` says whether the run's two
// clocks differ by more than 10% (bench_disturbance.hpp): on every row with a cpu_value, and
// on the other rows of a run whose value depends on wall time (a latency percentile, a
// queue's length), from the run's time per op and its twin. Rows that count (allocations,
// objects lost) or that are CPU time already carry neither, nor do the cases whose threads
// wait by design for the whole measurement (invoke/idle, wait-pending, wait-any-64: their
// descriptions say so). In the table, a disturbed figure is marked `*` and each row with
// twins is followed by a `(cpu clocks)` row of them.
//
// stdout carries only the report, so `palrt-bench x --json | jq` works; progress, skipped
// variants and notes go to stderr.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_disturbance.hpp"

namespace palrt::bench {

// The variant every ratio is taken against.
inline constexpr std::string_view palrt_variant = "palrt";

struct bench_result {
  std::string case_name;  // "flush", "hit/live=64"
  std::string variant;    // "palrt" or the baseline's name
  int threads = 0;        // what it counts is stated in the case's description
  std::string metric;     // ns_per_op, p50_ns, p99_ns, ops_per_s, allocs_per_op
  double value = 0.0;
  // The value timed by the threads' CPU clocks, where the metric has such a twin.
  std::optional<double> cpu_value = std::nullopt;
  // Whether the run was disturbed. add() fills it in from value and cpu_value when both are
  // there; a row without a twin is given its run's verdict by its case: is_disturbed() of the
  // run's time per op and its twin.
  std::optional<bool> disturbed = std::nullopt;
};

// What the results depend on, printed with them.
struct machine_info {
  int nproc = 0;                 // palrt::pal::processor_count(): affinity and cgroup quota
  std::string kernel;            // uname -r
  std::string barrier_strategy;  // the process's FlushProcessWriteBuffers strategy, or "none"
  bool barrier_forced = false;   // chosen through PALRT_BARRIER

  // Reads the machine now; call it after the component ran, so the barrier is initialised.
  static machine_info collect();
};

class bench_report {
 public:
  explicit bench_report(std::string component);

  const std::string& component() const noexcept { return component_; }

  void add(bench_result result);
  const std::vector<bench_result>& results() const noexcept { return results_; }

  // What a case measures and what its `threads` counts; printed under the table.
  void describe_case(std::string case_name, std::string description);

  // One progress line on stderr, prefixed with the tool and component.
  void progress(std::string_view line) const;
  // A variant that cannot work here: reported on stderr with the reason, and not measured.
  void skipped(std::string_view variant, std::string_view reason) const;

  void print_table(std::ostream& out, const machine_info& machine) const;
  void print_json(std::ostream& out, const machine_info& machine) const;

 private:
  std::string component_;
  std::vector<bench_result> results_;
  std::vector<std::pair<std::string, std::string>> case_descriptions_;
};

// `v` as a JSON number (up to 9 significant digits), or null if it is not finite.
std::string json_number(double v);

// For a progress line: "; by CPU clocks 3.210" and ", DISTURBED" where is_disturbed() says so.
std::string cpu_clock_note(double wall_figure, double cpu_figure);

}  // namespace palrt::bench

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
//                 "metric": "ns_per_op", "value": 612.3}, ...]}
//
// stdout carries only the report, so `palrt-bench x --json | jq` works; progress, skipped
// variants and notes go to stderr.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace palrt::bench {

// The variant every ratio is taken against.
inline constexpr std::string_view palrt_variant = "palrt";

struct bench_result {
  std::string case_name;  // "flush", "hit/live=64"
  std::string variant;    // "palrt" or the baseline's name
  int threads = 0;        // what it counts is stated in the case's description
  std::string metric;     // ns_per_op, p50_ns, p99_ns, ops_per_s, allocs_per_op
  double value = 0.0;
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

}  // namespace palrt::bench

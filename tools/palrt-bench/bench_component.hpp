// SPDX-License-Identifier: MIT
// What a palrt-bench component provides, and what the tool gives it.
//
// A component is one subcommand, `palrt-bench <component>`. Its file (bench_<component>.cpp)
// defines <component>_component(): the subcommand's name, its one-line description and how to
// run it. main.cpp lists the components and makes their subcommands: it is the one file of
// the tool that includes CLI11, whose header-only code costs every file that includes it
// ~10-15 s of compile time at -O3. Adding a component is one new file, one declaration below,
// one line in main.cpp's registry and one in meson.build; the global options, the output
// format (bench_report.hpp) and the timing rules (bench_timing.hpp) come with it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace palrt::bench {

class bench_report;

// The tool's global options, as every component sees them.
struct bench_settings {
  bool json = false;   // --json: the report is one JSON object instead of a table
  bool quick = false;  // --quick: a short run, for rough numbers
  // --smoke (implies quick): the shortest run that still produces every row of the report, for
  // the tests that check its format; its numbers mean nothing.
  bool smoke = false;
  std::optional<int> threads;  // --threads N: only that thread count; empty = the component's list

  // Each variant is measured this many times and the median reported: the machines are
  // noisy. Odd, so the median is a value that was actually measured.
  int repetitions() const noexcept { return smoke ? 1 : quick ? 3 : 7; }

  // How long one variant runs in one repetition.
  std::chrono::nanoseconds run_budget() const noexcept {
    return smoke   ? std::chrono::milliseconds(1)
           : quick ? std::chrono::milliseconds(20)
                   : std::chrono::milliseconds(200);
  }

  // The thread counts to measure: --threads if given, otherwise the component's defaults.
  std::vector<int> thread_counts(std::vector<int> component_defaults) const {
    if (threads) return {*threads};
    return component_defaults;
  }
};

// Thrown by a component for an argument it cannot use (say, a thread count that means nothing
// for it). The tool reports it like a parse error: one line on stderr, exit 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A component. Anything its run() throws is a runtime failure (exit 1), but for usage_error
// (exit 2). A variant that cannot work on this machine is not a failure: the component
// reports it through bench_report::skipped() and leaves it out of the results.
struct bench_component {
  const char* name;
  const char* description;  // --help's line for the subcommand
  std::function<void(const bench_settings&, bench_report&)> run;
};

using bench_registrar = bench_component (*)();

// One per component, in roadmap order.
bench_component barrier_component();
bench_component handles_component();
bench_component finalizer_component();
bench_component invoke_component();
bench_component cache_component();
bench_component retire_component();
bench_component gc_component();

}  // namespace palrt::bench

// What a palrt-bench component provides, and what the tool gives it.
//
// A component is one subcommand, `palrt-bench <component>`. Its file (bench_<component>.cpp)
// defines register_<component>(CLI::App& tool): it adds the subcommand and any options of its
// own, and returns how to run it. main.cpp lists the registrars. Adding a component is one new
// file, one declaration below, one line in main.cpp's registry and one in meson.build; the
// global options, the output format (bench_report.hpp) and the timing rules
// (bench_timing.hpp) come with it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace CLI {
class App;
}

namespace palrt::bench {

class bench_report;

// The tool's global options, as every component sees them.
struct bench_settings {
  bool json = false;           // --json: the report is one JSON object instead of a table
  bool quick = false;          // --quick: a short run for smoke tests
  std::optional<int> threads;  // --threads N: only that thread count; empty = the component's list

  // Each variant is measured this many times and the median reported: the machines are
  // noisy. Odd, so the median is a value that was actually measured.
  int repetitions() const noexcept { return quick ? 3 : 7; }

  // How long one variant runs in one repetition.
  std::chrono::nanoseconds run_budget() const noexcept {
    return quick ? std::chrono::milliseconds(20) : std::chrono::milliseconds(200);
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

// A registered subcommand. Anything else a component throws from run() is a runtime failure
// (exit 1). A variant that cannot work on this machine is not a failure: the component
// reports it through bench_report::skipped() and leaves it out of the results.
struct bench_subcommand {
  CLI::App* command = nullptr;  // owned by the tool's CLI::App
  std::function<void(const bench_settings&, bench_report&)> run;
};

using bench_registrar = bench_subcommand (*)(CLI::App& tool);

// One per component, in roadmap order.
bench_subcommand register_barrier(CLI::App& tool);
bench_subcommand register_handles(CLI::App& tool);
bench_subcommand register_finalizer(CLI::App& tool);
bench_subcommand register_invoke(CLI::App& tool);
bench_subcommand register_cache(CLI::App& tool);

}  // namespace palrt::bench

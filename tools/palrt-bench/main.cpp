// SPDX-License-Identifier: MIT
// palrt-bench: each palrt component measured beside its baselines in one run, in one format.
//
//   palrt-bench [--json] [--threads N] [--quick | --smoke] <component>
//
// The global options may also follow the component (`palrt-bench barrier --json`).
// Exit status: 0 the report was printed; 1 the benchmark failed at run time (the message says
// which component and why) or its report could not be written; 2 bad arguments (one line on
// stderr).

#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <palrt/pal/process_barrier.hpp>

#include "bench_component.hpp"
#include "bench_report.hpp"
#include "common/arguments.hpp"
#include "common/cli_checks.hpp"
#include "common/output.hpp"

#ifndef PALRT_BENCH_VERSION
#define PALRT_BENCH_VERSION "unknown"
#endif

namespace {

using namespace palrt::bench;

// Every component, in roadmap order. A new component is bench_<component>.cpp, its
// declaration in bench_component.hpp, and one line here.
constexpr bench_registrar registry[] = {
    barrier_component, handles_component, finalizer_component, invoke_component,
    cache_component,   retire_component,  gc_component,
};

// A component and the subcommand made for it.
struct bench_subcommand {
  bench_component component;
  CLI::App* command;  // owned by the tool's CLI::App
};

using palrt::tools::one_line;

// CLI11's and the components' messages, kept to one short line whatever the user typed.
int bad_arguments(std::string_view message, int argc, char** argv) {
  std::cerr << "palrt-bench: " << one_line(message, argc, argv) << " (see palrt-bench --help)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App tool{"Measures palrt components beside their baselines in one run and prints palrt/baseline ratios.",
                "palrt-bench"};
  bench_settings settings;
  std::string threads_text;
  tool.add_flag("--json", settings.json, "Print one JSON object (the DESIGN.md format) instead of the table");
  CLI::Option* threads_option =
      tool.add_option("--threads", threads_text,
                      "Measure this thread count instead of the component's own list (cache: 1 and this count, which "
                      "its scaling target compares)")
          ->check(palrt::tools::count_in(1, 256))  // checked as text: CLI11 would read 010 as 8
          ->type_name("N");
  tool.add_flag("--quick", settings.quick,
                "Short run for rough numbers: 3 repetitions of 20 ms instead of 7 of 200 ms");
  tool.add_flag("--smoke", settings.smoke,
                "Shortest run that still prints every row, for tests of the output: 1 repetition of 1 ms; the numbers "
                "mean nothing");
  tool.set_version_flag("--version", "palrt-bench " PALRT_BENCH_VERSION);
  // Lets the global options follow the component. Subcommands copy this setting when they are
  // added, so it is set before the registry runs.
  tool.fallthrough();
  // At most one component per run. "None given" is checked after parsing rather than with
  // require_subcommand(1): CLI11 would then answer a misspelt component with "A subcommand is
  // required" instead of naming the argument it did not expect.
  tool.require_subcommand(0, 1);

  std::vector<bench_subcommand> components;
  for (const bench_registrar describe : registry) {
    bench_component c = describe();
    CLI::App* command = tool.add_subcommand(c.name, c.description);
    components.push_back({std::move(c), command});
  }

  try {
    tool.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version: output that must reach its reader too
    const int status = tool.exit(e);
    return palrt::tools::finish_stdout("palrt-bench") ? status : 1;
  } catch (const CLI::ParseError& e) {
    return bad_arguments(e.what(), argc, argv);
  }
  if (*threads_option) settings.threads = palrt::tools::parse_count(threads_text, 1, 256);
  if (settings.smoke) settings.quick = true;  // what --quick shortens, --smoke shortens too

  const bench_subcommand* chosen = nullptr;
  for (const auto& c : components) {
    if (c.command->parsed()) chosen = &c;
  }
  if (chosen == nullptr) {
    std::string names;
    for (const auto& c : components) names += (names.empty() ? "" : ", ") + c.command->get_name();
    return bad_arguments("no component given; one of: " + names, argc, argv);
  }
  const std::string name = chosen->command->get_name();

  // palrt-bench is a palrt process, so it starts like one: the process barrier is set up first
  // thing, while the process has one thread, so registration takes the kernel's fast path and
  // every component measures a correctly started process. Failure is not fatal here: the
  // variants that need a barrier report themselves as skipped, with the reason.
  try {
    palrt::pal::initialize_process_barrier();
  } catch (const palrt::pal::barrier_error& e) {
    std::cerr << "palrt-bench: no process barrier strategy works here: " << one_line(e.what()) << '\n';
  }

  bench_report report(name);
  try {
    chosen->component.run(settings, report);
  } catch (const usage_error& e) {
    return bad_arguments(e.what(), argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "palrt-bench " << name << ": " << one_line(e.what()) << '\n';
    return 1;
  }
  if (report.results().empty()) {
    std::cerr << "palrt-bench " << name << ": no variant could be measured on this machine\n";
    return 1;
  }

  const machine_info machine = machine_info::collect();
  if (settings.json) {
    report.print_json(std::cout, machine);
  } else {
    report.print_table(std::cout, machine);
  }
  return palrt::tools::finish_stdout(("palrt-bench " + name).c_str()) ? 0 : 1;
}

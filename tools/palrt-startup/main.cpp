// SPDX-License-Identifier: MIT
// palrt-startup: run palrt's ordered bootstrap once and exit, for hyperfine to time.
//
// It starts what a host gets from bootstrap() with its defaults, so the time measured is the
// time a host pays: the sync manager's worker starts lazily, when first needed, which here is
// never. --sync-worker eager reproduces the eager start (CoreCLR's PAL starts that thread
// during startup).
//
// Startup cost is the product here: everything not needed for the chosen report waits
// until it is needed (system facts and the shim probe are read only when a report prints),
// and a run without options neither builds the option parser nor initialises the standard
// streams (it prints through stdio, if at all).
//
// Exit status: 0 done, and the report (if one was asked for) written; 1 a runtime failure:
// startup failed, a thread was not joined in time, or the output could not be written;
// 2 bad arguments. Each failure is one line on stderr.
// First: CLI11 without the standard streams' initialiser, which the run without options,
// printing nothing, does not pay (common/cli11.hpp).
#include "common/cli11.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/arguments.hpp"
#include "common/cli_checks.hpp"
#include "common/output.hpp"
#include "doctor.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "report_output.hpp"

#include "palrt/core/clock.h"

namespace {

constexpr const char* tool = "palrt-startup";
constexpr const char* version = "palrt-startup " PALRT_VERSION;

struct run_settings {
  palrt::startup::internal::ordering order = palrt::startup::internal::ordering::registered_first;
  palrt::startup::sync_worker_start sync_worker = palrt::startup::sync_worker_start::lazy;
  int extra_threads = 0;
  int objects = 0;
  std::string report = "none";
};

// The object that --objects creates: finalizable, with a weak handle to itself kept by the
// run, so that the services' counters show each part at work.
struct probe_object : palrt::gc::finalizable {
  void finalize() override {}
};

// Creates `n` objects with a long weak handle each, drops them, collects, waits for their
// finalizers and collects again (freeing them). Returns false if the finalizers did not run.
// With n = 0 it does nothing: a run that made no object has nothing to collect, and the time
// measured is then bootstrap() and shutdown() alone, as a host pays them.
bool exercise_services(palrt::startup::runtime_services& s, int n,
                       std::vector<palrt::gc::weak_handle<probe_object>>& handles) {
  using namespace palrt::gc;
  if (n == 0) return true;
  for (int i = 0; i < n; ++i) {
    ref<probe_object> o = make_object<probe_object>(s.collector());
    handles.emplace_back(o, handle_kind::weak_long);
  }
  s.collector().collect();
  if (s.finalizer().wait_for_pending_finalizers(std::chrono::seconds(10)) != pending_finalizers::finalized)
    return false;
  s.collector().collect();
  return true;
}

int run(const run_settings& settings) {
  using namespace palrt;
  startup::options opts;  // bootstrap()'s defaults, but for what the command line says
  opts.sync_worker = settings.sync_worker;
  // A report shows the thread count at registration, not only the inference from timing.
  opts.count_threads_at_registration = settings.report != "none";
  std::unique_ptr<startup::runtime> rt;
  try {
    rt = startup::internal::runtime_access::bootstrap(opts, settings.order);
  } catch (const startup::startup_error& e) {
    std::fprintf(stderr, "%s: %s\n", tool, tools::one_line(e.what()).c_str());
    return 1;
  }
  // Read now: once shutdown has joined the worker it no longer counts as started.
  const bool sync_worker_started = rt->services().sync_manager().worker_started();

  std::vector<gc::weak_handle<probe_object>> probe_handles;
  if (!exercise_services(rt->services(), settings.objects, probe_handles)) {
    std::fprintf(stderr, "%s: the finalizer did not finalize %d objects within 10 s\n", tool, settings.objects);
    rt->shutdown();
    return 1;
  }
  tools::services_counters services;
  services.handles = rt->services().handle_table().counters();

  // Extra idle threads, through the factory like every palrt thread.
  // Shared with the threads: one that misses its join deadline is detached and still uses it.
  auto release = std::make_shared<pal::wake_event>();
  std::vector<pal::managed_thread> extra;
  try {
    for (int i = 0; i < settings.extra_threads; ++i)
      extra.push_back(pal::start_thread({"palrt-idle-" + std::to_string(i), 0}, [release] {
        release->wait();
        release->set();  // pass the wake-up on to the next idle thread
      }));
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "%s: extra thread %zu: %s\n", tool, extra.size(), tools::one_line(e.what()).c_str());
    release->set();
    for (auto& t : extra) t.join();
    rt->shutdown();
    return 1;
  }

  const std::int64_t t0 = palrt_monotonic_ns();
  release->set();
  bool clean = true;
  for (auto& t : extra) {
    if (t.join_for(opts.stop_timeout)) continue;
    clean = false;
    t.detach();  // reported below; it owns its share of `release`
  }
  clean = rt->shutdown().clean() && clean;
  const std::int64_t shutdown_ns = palrt_monotonic_ns() - t0;
  services.objects = rt->services().collector().counters();
  services.finalizer = rt->services().finalizer().counters();
  probe_handles.clear();

  bool written = true;
  if (settings.report != "none") {
    tools::run_facts facts{&rt->report(), settings.order,       shutdown_ns,         settings.extra_threads,
                           clean,         settings.sync_worker, sync_worker_started, settings.objects,
                           services};
    if (settings.report == "json") tools::print_json_report(stdout, facts);
    if (settings.report == "text") tools::print_text_report(stdout, facts);
    written = tools::finish_stdout(tool);
  }
  if (!clean) {
    std::fprintf(stderr, "%s: a thread was not joined within %lld ms\n", tool,
                 static_cast<long long>(opts.stop_timeout.count()));
    return 1;
  }
  return written ? 0 : 1;
}

int bad_arguments(std::string_view message, int argc, char** argv) {
  std::fprintf(stderr, "%s: %s (see --help)\n", tool, palrt::tools::one_line(message, argc, argv).c_str());
  return 2;
}

}  // namespace

// Every command line but the empty one. A function of its own, never inlined: its frame
// (CLI11's App, the option values: 2.6 KB) would otherwise be main's, and a run without
// options would reach a third page of the stack when bootstrap() binds its first libc
// functions lazily (the dynamic linker's resolver saves the vector registers there): one
// more page fault, 9-16 us on the VMs palrt is measured on.
[[gnu::noinline]] static int parse_and_run(int argc, char** argv) {
  // CLI11 prints --help, --version and its errors through std::cout and std::cerr, which
  // this translation unit does not initialise (common/cli11.hpp): they exist from here on.
  const std::ios_base::Init standard_streams;
  using palrt::tools::count_in;
  using palrt::tools::one_of;
  CLI::App app{"Runs palrt's ordered bootstrap (membarrier registration, then the service threads) with "
               "bootstrap()'s defaults, shuts down and exits. Time it with hyperfine; read it with --report.",
               "palrt-startup"};
  std::string order_name = "registered-first";
  std::string threads_text = "0";
  std::string objects_text = "0";
  std::string sync_worker_name = "lazy";
  std::string report = "none";
  // Values are checked as text, with messages that show a bad value in one short line.
  CLI::Option* const run_options[] = {
      app.add_option("--order", order_name, "registered-first (default), threads-first, no-membarrier")
          ->check(one_of({"registered-first", "threads-first", "no-membarrier"}))
          ->type_name("ORDER"),
      app.add_option("--threads", threads_text, "extra idle threads to start through the thread factory (default 0)")
          ->check(count_in(0, 4096))
          ->type_name("N"),
      app.add_option("--objects", objects_text,
                     "finalizable objects to create, drop, collect and finalize before shutdown, so the "
                     "report's service counters show the handle table, collector and finalizer at work (default 0)")
          ->check(count_in(0, 10000000))
          ->type_name("N"),
      app.add_option("--sync-worker", sync_worker_name,
                     "when the sync manager's worker starts: lazy (default, as bootstrap() does: when first "
                     "needed, so not in this run) or eager (during bootstrap, as CoreCLR's PAL does)")
          ->check(one_of({"lazy", "eager"}))
          ->type_name("WHEN"),
      app.add_option("--report", report, "none (default), text or json")
          ->check(one_of({"none", "text", "json"}))
          ->type_name("FORMAT"),
  };
  app.set_version_flag("--version", version);
  auto* doctor = app.add_subcommand("doctor", "report what this machine offers palrt and what it would choose "
                                              "(takes none of the options above)");
  // Options after `doctor` reach the main command, so `doctor --threads 3` and
  // `--threads 3 doctor` are refused alike, with the same message, below.
  doctor->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version: output that must reach its reader too
      const int status = app.exit(e);
      return palrt::tools::finish_stdout(tool) ? status : 1;
    }
    return bad_arguments(e.what(), argc, argv);
  }
  if (doctor->parsed()) {
    // A second `doctor` falls through to the main command, which takes it for the
    // subcommand again: CLI11 counts it rather than refusing it.
    if (doctor->count() > 1) return bad_arguments("doctor was given more than once", argc, argv);
    for (const CLI::Option* option : run_options)
      if (option->count() > 0)
        return bad_arguments("doctor takes none of the run's options, and " + option->get_name() + " was given", argc,
                             argv);
    const int status = palrt::tools::run_doctor(stdout);
    return palrt::tools::finish_stdout(tool) ? status : 1;
  }

  run_settings settings;
  settings.order = *palrt::startup::internal::parse_ordering(order_name);
  settings.sync_worker =
      sync_worker_name == "eager" ? palrt::startup::sync_worker_start::eager : palrt::startup::sync_worker_start::lazy;
  settings.extra_threads = *palrt::tools::parse_count(threads_text, 0, 4096);
  settings.objects = *palrt::tools::parse_count(objects_text, 0, 10000000);
  settings.report = report;
  return run(settings);
}

int main(int argc, char** argv) {
  // No arguments: the run is bootstrap()'s defaults, and nothing is left to parse. CLI11's
  // parser is not built then, because building it (its options, their checks, the locale it
  // consults) costs this process 40-100 us on a 2-vCPU VM, 4-10% of its whole life, and a
  // host linking palrt pays none of it: what hyperfine times for `palrt-startup` is the
  // process, the C++ runtime and palrt. Every other command line is parsed by parse_and_run.
  if (argc == 1) return run(run_settings{});
  return parse_and_run(argc, argv);
}

// palrt-startup: run palrt's ordered bootstrap once and exit, for hyperfine to time.
//
// Startup cost is the product here: everything not needed for the chosen report waits
// until it is needed (system facts and the shim probe are read only when a report prints).
#include <CLI/App.hpp>
#include <CLI/Config.hpp>
#include <CLI/Formatter.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "doctor.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "report_output.hpp"

#include "palrt/core/clock.h"

namespace {

constexpr const char* version = "palrt-startup " PALRT_VERSION;

int run(palrt::startup::ordering order, int extra_threads, const std::string& report) {
  using namespace palrt;
  startup::options opts;
  opts.order = order;
  opts.sync_worker = startup::sync_worker_start::eager;  // the full service set, as CoreCLR starts it
  // A report shows the thread count at registration, not only the inference from timing.
  opts.count_threads_at_registration = report != "none";
  std::unique_ptr<startup::runtime> rt;
  try {
    rt = startup::bootstrap(opts);
  } catch (const startup::startup_error& e) {
    std::fprintf(stderr, "palrt-startup: %s\n", e.what());
    return 1;
  }

  // Extra idle threads, through the factory like every palrt thread.
  pal::wake_event release;
  std::vector<pal::managed_thread> extra;
  try {
    for (int i = 0; i < extra_threads; ++i)
      extra.push_back(pal::start_thread({"palrt-idle-" + std::to_string(i), 0}, [&release] {
        release.wait();
        release.set();  // pass the wake-up on to the next idle thread
      }));
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "palrt-startup: extra thread %zu: %s\n", extra.size(), e.what());
    release.set();
    for (auto& t : extra) t.join();
    rt->shutdown();
    return 1;
  }

  const std::int64_t t0 = palrt_monotonic_ns();
  release.set();
  bool clean = true;
  for (auto& t : extra) clean = t.join_for(opts.stop_timeout) && clean;
  clean = rt->shutdown().clean() && clean;
  const std::int64_t shutdown_ns = palrt_monotonic_ns() - t0;

  tools::run_facts facts{&rt->report(), shutdown_ns, extra_threads, clean};
  if (report == "json") tools::print_json_report(stdout, facts);
  if (report == "text") tools::print_text_report(stdout, facts);
  if (!clean) {
    std::fprintf(stderr, "palrt-startup: a thread was not joined within %lld ms\n",
                 static_cast<long long>(opts.stop_timeout.count()));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs palrt's ordered bootstrap (membarrier registration, then the service threads), "
               "shuts down and exits. Time it with hyperfine; read it with --report.",
               "palrt-startup"};
  std::string order_name = "registered-first";
  int extra_threads = 0;
  std::string report = "none";
  app.add_option("--order", order_name, "registered-first (default), threads-first, no-membarrier")
      ->check(CLI::IsMember({"registered-first", "threads-first", "no-membarrier"}));
  app.add_option("--threads", extra_threads, "extra idle threads to start through the thread factory")
      ->check(CLI::Range(0, 4096));
  app.add_option("--report", report, "none (default), text or json")->check(CLI::IsMember({"none", "text", "json"}));
  app.set_version_flag("--version", version);
  auto* doctor = app.add_subcommand("doctor", "report what this machine offers palrt and what it would choose");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "palrt-startup: %s (see --help)\n", e.what());
    return 2;
  }
  if (doctor->parsed()) return palrt::tools::run_doctor(stdout);
  return run(*palrt::startup::parse_ordering(order_name), extra_threads, report);
}

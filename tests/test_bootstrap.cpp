// The ordered bootstrap, each case in a fresh process: registration is per process and
// sticky, and "threads alive at registration" needs a process with no other threads.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pal/internal/thread_start_faults.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/thread_census.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/preload_probe.hpp"
#include "privileges.hpp"
#include "kernel_support.hpp"
#include "subprocess.hpp"
#include "thread_state.hpp"

using namespace palrt;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;
using palrt::testing::run_options;

namespace {


bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

// Runs a bootstrap and prints what a test asserts on, one "key=value" per token. Thread
// counts are of palrt's own threads (named "palrt-"), plus `foreign`: threads that are
// neither palrt's nor main (a sanitizer's), which the kernel's census includes.
int bootstrap_and_describe(startup::ordering order, startup::sync_worker_start worker) {
  startup::options opts;
  opts.order = order;
  opts.sync_worker = worker;
  try {
    auto rt = startup::bootstrap(opts);
    const auto& r = rt->report();
    const auto reg = startup::summarize_registration(r);
    std::printf("phases=");
    for (const auto& p : r.phases) std::printf("%s,", p.name.c_str());
    const int palrt_threads = palrt::testing::palrt_threads_alive();
    std::printf(" registered_by=%s threads_at_registration=%d strategy=%s palrt_threads=%d foreign=%d",
                std::string(startup::to_string(reg.registered_by)).c_str(), reg.threads_at_registration,
                std::string(pal::to_string(r.barrier.strategy)).c_str(), palrt_threads,
                pal::threads_in_process() - palrt_threads - 1);
    bool ordered = r.bootstrap_ns > 0;
    for (std::size_t i = 1; i < r.phases.size(); ++i)
      ordered = ordered && r.phases[i].start_ns >= r.phases[i - 1].start_ns + r.phases[i - 1].duration_ns;
    std::printf(" timings_ordered=%d", ordered);
    const auto& down = rt->shutdown();
    std::printf(" shutdown_clean=%d palrt_threads_after=%d pe=%d\n", down.clean(),
                palrt::testing::palrt_threads_alive(), pal::membarrier::private_expedited().error);
    return 0;
  } catch (const startup::startup_error& e) {
    std::printf("failed phase=%s errno=%d palrt_threads_after=%d what=%s\n", e.phase().c_str(), e.code().value(),
                palrt::testing::palrt_threads_alive(), e.what());
    return 3;
  }
}

// The number after "key=" in a child's output, or -1.
int field(const std::string& out, const std::string& key) {
  auto at = out.find(" " + key + "=");
  if (at == std::string::npos) at = out.find(key + "=") == 0 ? 0 : std::string::npos;
  if (at == std::string::npos) return -1;
  return std::atoi(out.c_str() + out.find('=', at) + 1);
}

}  // namespace

PALRT_FRESH_PROCESS(boot_registered_first) {
  return bootstrap_and_describe(startup::ordering::registered_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_threads_first) {
  return bootstrap_and_describe(startup::ordering::threads_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_no_membarrier) {
  return bootstrap_and_describe(startup::ordering::no_membarrier, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_lazy_sync_worker) {
  return bootstrap_and_describe(startup::ordering::registered_first, startup::sync_worker_start::lazy);
}
PALRT_FRESH_PROCESS(boot_fault_in_sync_manager) {
  pal::internal::inject_thread_start_failure(1, EAGAIN);  // the finalizer starts, the sync worker does not
  return bootstrap_and_describe(startup::ordering::registered_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_under_rlimit_nproc) {
  if (!palrt::testing::limit_tasks(1)) return 2;
  return bootstrap_and_describe(startup::ordering::registered_first, startup::sync_worker_start::eager);
}

TEST_CASE("bootstrap: registered-first registers with one thread alive, then starts the services") {
  auto c = run_fresh("boot_registered_first");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "phases=process-barrier,finalizer,sync-manager,"));
  CHECK(has(c.out, "palrt_threads=2"));  // finalizer, sync manager worker
  CHECK(has(c.out, "timings_ordered=1"));
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
  if (membarrier_available()) {
    CHECK(has(c.out, "registered_by=bootstrap threads_at_registration=1 strategy=membarrier"));
    CHECK(has(c.out, "pe=0"));
  } else {
    CHECK(has(c.out, "registered_by=none"));
  }
}

TEST_CASE("bootstrap: threads-first registers after its threads exist (the slow, old order)") {
  auto c = run_fresh("boot_threads_first");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "phases=finalizer,sync-manager,process-barrier,"));
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
  if (membarrier_available()) {
    CHECK(has(c.out, "registered_by=bootstrap"));
    CHECK(field(c.out, "threads_at_registration") == 3 + field(c.out, "foreign"));  // main + 2 services
  }
}

TEST_CASE("bootstrap: no-membarrier never registers and uses a fallback barrier") {
  auto c = run_fresh("boot_no_membarrier");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "registered_by=none threads_at_registration=0"));
  CHECK_FALSE(has(c.out, "strategy=membarrier"));
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
  if (membarrier_available()) CHECK(has(c.out, "pe=" + std::to_string(EPERM)));
}

TEST_CASE("bootstrap: by default the sync manager worker waits until it is needed") {
  auto c = run_fresh("boot_lazy_sync_worker");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "palrt_threads=1"));  // the finalizer
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
}

TEST_CASE("bootstrap: a failing phase unwinds what started before it; the error names the phase and errno") {
  auto c = run_fresh("boot_fault_in_sync_manager");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 3);
  CHECK(has(c.out, "failed phase=sync-manager errno=" + std::to_string(EAGAIN) + " palrt_threads_after=0"));
  CHECK(has(c.out, "phase 'sync-manager' failed"));
  CHECK(has(c.out, "[EAGAIN]"));
}

TEST_CASE("bootstrap: under RLIMIT_NPROC the finalizer phase fails with EAGAIN and leaves no thread") {
  auto c = run_fresh("boot_under_rlimit_nproc", run_options{palrt::testing::privilege_drop_env(), {}});
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 3);
  CHECK(has(c.out, "failed phase=finalizer errno=" + std::to_string(EAGAIN) + " palrt_threads_after=0"));
}

TEST_CASE("bootstrap: a barrier that cannot be set up fails the process-barrier phase before any thread") {
  // Forcing membarrier where it is denied (seccomp variants), or contradicting the ordering.
  if (membarrier_available()) {
    auto c = run_fresh("boot_no_membarrier", run_options{{"PALRT_BARRIER=membarrier"}, {}});
    INFO(c.out, c.err);
    REQUIRE(c.exit_code == 3);
    CHECK(has(c.out, "failed phase=process-barrier errno=" + std::to_string(EINVAL) + " palrt_threads_after=0"));
  } else {
    auto c = run_fresh("boot_registered_first", run_options{{"PALRT_BARRIER=membarrier"}, {}});
    INFO(c.out, c.err);
    REQUIRE(c.exit_code == 3);
    CHECK(has(c.out, "failed phase=process-barrier"));
    CHECK((has(c.out, "errno=" + std::to_string(EPERM)) || has(c.out, "errno=" + std::to_string(ENOSYS))));
    CHECK(has(c.out, "palrt_threads_after=0"));
  }
}

TEST_CASE("bootstrap: under the preload shim, threads-first registers with one thread (the shim's)") {
  if (!membarrier_available()) return;  // nothing for the shim to register
  auto c = run_fresh("boot_threads_first",
                     run_options{palrt::testing::preload_env(palrt::testing::artefact("PALRT_TEST_SHIM")), {}});
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "phases=finalizer,sync-manager,process-barrier,"));
  CHECK(has(c.out, "registered_by=preload threads_at_registration=1 strategy=membarrier"));
}

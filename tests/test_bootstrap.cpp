// SPDX-License-Identifier: MIT
// The ordered bootstrap, each case in a fresh process: registration is per process and
// sticky, and "threads alive at registration" needs a process with no other threads.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <chrono>
#include <thread>

#include "palrt/core/membarrier_registration.h"
#include "palrt/core/thread_census.h"
#include "palrt/pal/internal/thread_factory_access.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/wake_event.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/internal/baselines.hpp"  // the orders bootstrap() is measured against
#include "palrt/startup/preload_probe.hpp"
#include "privileges.hpp"
#include "kernel_support.hpp"
#include "cancellation.hpp"
#include "subprocess.hpp"
#include "thread_state.hpp"

using namespace palrt;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;
using palrt::testing::run_options;

namespace {

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }
std::size_t occurrences(const std::string& out, const std::string& what) {
  std::size_t n = 0;
  for (auto at = out.find(what); at != std::string::npos; at = out.find(what, at + what.size())) ++n;
  return n;
}

// Runs a bootstrap and prints what a test asserts on, one "key=value" per token. Thread
// counts are of palrt's own threads (named "palrt-"), plus `foreign`: threads that are
// neither palrt's nor main (a sanitizer's), which the kernel's census includes.
int bootstrap_and_describe(startup::internal::ordering order, startup::sync_worker_start worker, bool count = false) {
  startup::options opts;
  opts.sync_worker = worker;
  opts.count_threads_at_registration = count;
  try {
    auto rt = startup::internal::runtime_access::bootstrap(opts, order);
    const auto& r = rt->report();
    const auto reg = startup::summarize_registration(r);
    std::printf("phases=");
    for (const auto& p : r.phases) std::printf("%s,", p.name.c_str());
    // bootstrap() does not wait for its threads to run, and a thread names itself as it
    // starts: counted once the names settle (the finalizer, and the worker if eager).
    const int palrt_threads =
        palrt::testing::palrt_threads_alive_settled(worker == startup::sync_worker_start::eager ? 2 : 1);
    std::printf(" registered_by=%s threads_at_registration=%d fast_path_inferred=%d strategy=%s palrt_threads=%d"
                " foreign=%d",
                std::string(startup::to_string(reg.registered_by)).c_str(), reg.threads_at_registration,
                reg.fast_path_inferred, std::string(pal::to_string(r.barrier.strategy)).c_str(), palrt_threads,
                palrt_threads_in_process() - palrt_threads - 1);
    bool ordered = r.bootstrap_ns > 0;
    for (std::size_t i = 1; i < r.phases.size(); ++i)
      ordered = ordered && r.phases[i].start_ns >= r.phases[i - 1].start_ns + r.phases[i - 1].duration_ns;
    std::printf(" timings_ordered=%d", ordered);
    const auto& down = rt->shutdown();
    std::printf(" shutdown_clean=%d palrt_threads_after=%d pe=%d\n", down.clean(),
                palrt::testing::palrt_threads_alive_settled(0), pal::membarrier::private_expedited().error);
    return 0;
  } catch (const startup::startup_error& e) {
    std::printf("failed phase=%s errno=%d palrt_threads_after=%d what=%s\n", e.phase().c_str(), e.code().value(),
                palrt::testing::palrt_threads_alive_settled(0), e.what());
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
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_registered_first_counted) {
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::eager, true);
}
PALRT_FRESH_PROCESS(boot_threads_first) {
  return bootstrap_and_describe(startup::internal::ordering::threads_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_threads_first_counted) {
  return bootstrap_and_describe(startup::internal::ordering::threads_first, startup::sync_worker_start::eager, true);
}
PALRT_FRESH_PROCESS(boot_no_membarrier) {
  return bootstrap_and_describe(startup::internal::ordering::no_membarrier, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_lazy_sync_worker) {
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::lazy);
}
PALRT_FRESH_PROCESS(boot_fault_in_sync_manager) {
  pal::internal::thread_factory_access::inject_thread_start_failure(
      1, EAGAIN);  // the finalizer starts, the sync worker does not
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_fault_in_finalizer) {
  pal::internal::thread_factory_access::inject_thread_start_failure(0, EAGAIN);  // the first thread: the finalizer
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::eager);
}
PALRT_FRESH_PROCESS(boot_under_rlimit_nproc) {
  if (!palrt::testing::limit_tasks(1)) return 2;
  return bootstrap_and_describe(startup::internal::ordering::registered_first, startup::sync_worker_start::eager);
}

TEST_CASE("bootstrap: registered-first registers with one thread alive, then starts the services" *
          palrt::testing::fallback_case) {
  auto c = run_fresh("boot_registered_first");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "phases=process-barrier,handle-table,finalizer,sync-manager,"));
  CHECK(has(c.out, "palrt_threads=2"));  // finalizer, sync manager worker
  CHECK(has(c.out, "timings_ordered=1"));
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
  if (membarrier_available()) {
    CHECK(has(c.out, "registered_by=bootstrap"));
    CHECK(has(c.out, "strategy=membarrier"));
    CHECK(has(c.out, "pe=0"));
    // By default the startup path reads no /proc: a fast-looking registration is reported as
    // an inference, with no count.
    if (field(c.out, "fast_path_inferred") == 1) CHECK(field(c.out, "threads_at_registration") == 0);
    // Asked to count, it counts: main alone (a sanitizer's own thread starts at the first
    // pthread_create, after registration).
    auto counted = run_fresh("boot_registered_first_counted");
    INFO(counted.out, counted.err);
    REQUIRE(counted.exit_code == 0);
    CHECK(field(counted.out, "threads_at_registration") == 1);
  } else {
    CHECK(has(c.out, "registered_by=none"));
  }
}

TEST_CASE("bootstrap: threads-first registers after its threads exist (the slow, old order)" *
          palrt::testing::fallback_case) {
  auto c = run_fresh("boot_threads_first");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "phases=handle-table,finalizer,sync-manager,process-barrier,"));
  CHECK(has(c.out, "shutdown_clean=1 palrt_threads_after=0"));
  if (membarrier_available()) {
    CHECK(has(c.out, "registered_by=bootstrap"));
    // A slow registration is always counted: main + 2 services (+ a sanitizer's threads).
    if (field(c.out, "fast_path_inferred") == 0)
      CHECK(field(c.out, "threads_at_registration") == 3 + field(c.out, "foreign"));
  }
}

namespace {

// Sets /sys/kernel/rcu_expedited for the scope and restores it: the one machine setting that
// makes a registration with threads alive as fast as the single-threaded path. Empty when it
// cannot be written (not root, read-only sysfs). The setting is the machine's: two test runs
// at once (two build folders' suites) would each save what the other set and leave it at 1,
// slowing every process start on the machine after. So the override holds an exclusive lock
// on a lock file from reading the old value until it is restored; the kernel drops the lock
// if the process dies.
class rcu_expedited_override {
 public:
  explicit rcu_expedited_override(char value) {
    lock_ = ::open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_ < 0 || ::flock(lock_, LOCK_EX) != 0) return;
    int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    char old = 0;
    if (::read(fd, &old, 1) == 1 && ::pwrite(fd, &value, 1, 0) == 1) saved_ = old;
    ::close(fd);
  }
  ~rcu_expedited_override() {
    if (saved_) {
      int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)::write(fd, &*saved_, 1);
        ::close(fd);
      }
    }
    if (lock_ >= 0) ::close(lock_);  // and with it the lock
  }
  rcu_expedited_override(const rcu_expedited_override&) = delete;
  rcu_expedited_override& operator=(const rcu_expedited_override&) = delete;
  bool active() const { return saved_.has_value(); }

 private:
  static constexpr const char* path = "/sys/kernel/rcu_expedited";
  static constexpr const char* lock_path = "/tmp/palrt-test-rcu-expedited.lock";
  int lock_ = -1;
  std::optional<char> saved_;
};

}  // namespace

TEST_CASE("bootstrap: a fast registration with threads alive is never reported as one thread (rcu_expedited=1)") {
  if (!membarrier_available()) return;
  rcu_expedited_override expedited('1');
  if (!expedited.active()) {
    MESSAGE("skipped: /sys/kernel/rcu_expedited is not writable here (needs root)");
    return;
  }
  // With expedited grace periods the late registration of threads-first takes ~100-150 us,
  // under the fast-path bound, while 3 threads were alive. The report must not turn that
  // inference into a count of 1. Several runs, since a busy machine can push one over it.
  int fast_looking = 0;
  for (int run = 0; run < 5; ++run) {
    auto c = run_fresh("boot_threads_first");
    INFO(c.out, c.err);
    REQUIRE(c.exit_code == 0);
    CHECK(field(c.out, "threads_at_registration") != 1);
    if (field(c.out, "fast_path_inferred") == 0)
      CHECK(field(c.out, "threads_at_registration") == 3 + field(c.out, "foreign"));
    else
      ++fast_looking;
  }
  MESSAGE(fast_looking << " of 5 late registrations looked like the fast path");
  // The same through palrt-startup's report, which is what a person reads.
  for (int run = 0; run < 5; ++run) {
    auto r = palrt::testing::run_process({palrt::testing::artefact("PALRT_TEST_STARTUP"), "--order", "threads-first",
                                          "--sync-worker", "eager", "--report", "json"});
    INFO(r.out, r.err);
    REQUIRE(r.exit_code == 0);
    // main, the finalizer and the sync worker (and a sanitizer's own thread, if any)
    const auto at = r.out.find("\"threads_at_registration\":");
    REQUIRE(at != std::string::npos);
    CHECK(std::atoi(r.out.c_str() + at + sizeof "\"threads_at_registration\":" - 1) >= 3);
  }
  auto counted = run_fresh("boot_threads_first_counted");
  INFO(counted.out, counted.err);
  REQUIRE(counted.exit_code == 0);
  CHECK(field(counted.out, "threads_at_registration") == 3 + field(counted.out, "foreign"));
}

PALRT_FRESH_PROCESS(boot_twice) {
  auto first = startup::bootstrap();
  const int threads = palrt::testing::palrt_threads_alive_settled(1);  // named as it starts
  try {
    auto second = startup::bootstrap();
    std::printf("second=started palrt_threads=%d\n", palrt::testing::palrt_threads_alive());
    return 1;
  } catch (const startup::startup_error& e) {
    std::printf("second=refused phase=%s errno=%d unchanged=%d\n", e.phase().c_str(), e.code().value(),
                palrt::testing::palrt_threads_alive() == threads);
  }
  first->shutdown();
  // Shut down, the process may bootstrap again, and the first runtime stays inert.
  auto third = startup::bootstrap();
  std::printf("third=started palrt_threads=%d\n", palrt::testing::palrt_threads_alive_settled(1));
  third->shutdown();
  first.reset();
  std::printf("after=%d\n", palrt::testing::palrt_threads_alive_settled(0));
  return 0;
}

TEST_CASE("bootstrap: a second bootstrap while a runtime is alive is refused (EBUSY); after shutdown it works") {
  auto c = run_fresh("boot_twice");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "second=refused phase=bootstrap errno=" + std::to_string(EBUSY) + " unchanged=1"));
  CHECK(has(c.out, "third=started palrt_threads=1"));  // the finalizer; the sync worker is lazy
  CHECK(has(c.out, "after=0"));
}

PALRT_FRESH_PROCESS(boot_concurrent_shutdown) {
  // Two threads shut the same runtime down at once, many times over: one does the work, both
  // get the same complete report, every service thread is joined once.
  constexpr int rounds = 50;
  int bad = 0;
  for (int round = 0; round < rounds; ++round) {
    startup::options opts;
    opts.sync_worker = startup::sync_worker_start::eager;
    auto rt = startup::bootstrap(opts);
    std::atomic<int> ready{0};
    const startup::shutdown_report* seen[2] = {nullptr, nullptr};
    auto call = [&](int i) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      seen[i] = &rt->shutdown();
    };
    std::thread a(call, 0), b(call, 1);
    a.join();
    b.join();
    if (seen[0] != seen[1] || !seen[0]->clean() || seen[0]->duration_ns <= 0 ||
        palrt::testing::palrt_threads_alive_settled(0) != 0)
      ++bad;
  }
  std::printf("rounds=%d bad=%d\n", rounds, bad);
  return 0;
}

TEST_CASE("bootstrap: shutdown from two threads at once does the work once; both see the same report") {
  auto c = run_fresh("boot_concurrent_shutdown");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "rounds=50 bad=0"));
}

TEST_CASE("bootstrap: no-membarrier never registers and uses a fallback barrier" * palrt::testing::fallback_case) {
  auto c = run_fresh("boot_no_membarrier");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "registered_by=none threads_at_registration=0 fast_path_inferred=0"));
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
  // The reason once: the thread factory's error says it, and what() does not repeat it.
  CHECK(occurrences(c.out, std::strerror(EAGAIN)) == 1);
}

TEST_CASE("bootstrap: a finalizer thread that cannot be created fails bootstrap itself, never later (EAGAIN)") {
  // bootstrap() no longer waits for its threads to run: creating one is the last step that
  // can fail, and that failure is still bootstrap()'s, unwound and named.
  auto c = run_fresh("boot_fault_in_finalizer");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 3);
  CHECK(has(c.out, "failed phase=finalizer errno=" + std::to_string(EAGAIN) + " palrt_threads_after=0"));
  CHECK(has(c.out, "[EAGAIN]"));
}

namespace {

// Holds each palrt thread in its start hook (pal::set_thread_hooks) until opened: the window
// between a service thread's creation and its loop, which bootstrap() does not wait out.
struct start_gate {
  pal::wake_event open;
  std::atomic<int> held{0};
};

void hold_at_start(void* context) noexcept {
  auto& gate = *static_cast<start_gate*>(context);
  gate.held.fetch_add(1);
  gate.open.wait();
  gate.open.set();  // auto-reset: passed on to the next thread held here
}

std::atomic<int> gated_finalized{0};
struct gated_probe : gc::finalizable {
  void finalize() override { gated_finalized.fetch_add(1); }
};

}  // namespace

PALRT_FRESH_PROCESS(boot_returns_before_threads_run) {
  constexpr int objects = 5;
  start_gate gate;
  pal::set_thread_hooks({&hold_at_start, nullptr, &gate});
  // If bootstrap() waited for the finalizer to run its loop, it would wait for this gate: a
  // watchdog opens it after a bound so that such a regression fails here instead of hanging.
  pal::wake_event main_done;
  std::atomic<bool> watchdog_opened{false};
  std::thread watchdog([&] {
    if (main_done.wait_for(std::chrono::seconds(20))) return;
    watchdog_opened.store(true);
    gate.open.set();
  });
  int bad = 0;
  {
    auto rt = startup::bootstrap();
    const bool returned_first = !watchdog_opened.load();
    // Work given to the finalizer before it reached its loop is kept for it.
    for (int i = 0; i < objects; ++i) (void)gc::make_object<gated_probe>(rt->services().collector());
    rt->services().collector().collect();
    const bool thread_was_held = palrt::testing::eventually([&] { return gate.held.load() == 1; });
    const bool none_yet = gated_finalized.load() == 0;
    gate.open.set();
    const auto waited = rt->services().finalizer().wait_for_pending_finalizers(std::chrono::seconds(10));
    const auto& down = rt->shutdown();
    std::printf("returned_first=%d held=%d none_before_open=%d finalized=%d/%d wait=%d clean=%d\n", returned_first,
                thread_was_held, none_yet, gated_finalized.load(), objects, waited == gc::pending_finalizers::finalized,
                down.clean());
    bad += !returned_first;
  }
  {
    // A stop request made before the thread reaches its loop is kept too: the thread, once
    // let through, stops at once and is joined.
    start_gate second;
    pal::set_thread_hooks({&hold_at_start, nullptr, &second});
    auto rt = startup::bootstrap();
    const bool held = palrt::testing::eventually([&] { return second.held.load() == 1; });
    rt->services().finalizer().request_stop();
    second.open.set();
    const auto& down = rt->shutdown();
    std::printf("stop_before_loop: held=%d clean=%d palrt_threads_after=%d\n", held, down.clean(),
                palrt::testing::palrt_threads_alive_settled(0));
  }
  main_done.set();
  watchdog.join();
  return bad;
}

TEST_CASE("bootstrap: returns before its threads run their loops; work and a stop given meanwhile are kept") {
  auto c = run_fresh("boot_returns_before_threads_run");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "returned_first=1 held=1 none_before_open=1 finalized=5/5 wait=1 clean=1"));
  CHECK(has(c.out, "stop_before_loop: held=1 clean=1 palrt_threads_after=0"));
}

TEST_CASE("bootstrap: under RLIMIT_NPROC the finalizer phase fails with EAGAIN and leaves no thread") {
  auto c = run_fresh("boot_under_rlimit_nproc", run_options{palrt::testing::privilege_drop_env(), {}});
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 3);
  CHECK(has(c.out, "failed phase=finalizer errno=" + std::to_string(EAGAIN) + " palrt_threads_after=0"));
}

TEST_CASE("bootstrap: a barrier that cannot be set up fails the process-barrier phase before any thread" *
          palrt::testing::fallback_case) {
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
  CHECK(has(c.out, "phases=handle-table,finalizer,sync-manager,process-barrier,"));
  CHECK(has(c.out, "registered_by=preload"));
  CHECK(has(c.out, "strategy=membarrier"));
  CHECK(has(c.out, "fast_path_inferred=1"));
}

// Bootstraps (registered-first, census by default) in a process that `registered_before`
// registered itself first, with one thread, as a host may; prints what pal's own state says
// about the census. The record a report shows is summarize_registration()'s, so that too.
int bootstrap_after_registration(bool registered_before) {
  if (registered_before) {
    palrt_registration reg;
    palrt_membarrier_register(&reg);
    if (reg.error != 0) return 4;
  }
  auto rt = startup::bootstrap();
  const auto reg = startup::summarize_registration(rt->report());
  std::printf("registered_by=%s barrier_threads_at_registration=%d barrier_fast_path_inferred=%d\n",
              std::string(startup::to_string(reg.registered_by)).c_str(), rt->report().barrier.threads_at_registration,
              rt->report().barrier.fast_path_inferred);
  return rt->shutdown().clean() ? 0 : 5;
}
PALRT_FRESH_PROCESS(boot_registered_by_host_first) { return bootstrap_after_registration(true); }
PALRT_FRESH_PROCESS(boot_registered_by_nobody_first) { return bootstrap_after_registration(false); }

TEST_CASE("bootstrap: under the shim, the shim's record stands in for the thread census (no /proc read)") {
  if (!membarrier_available()) return;  // nothing for the shim to register
  auto c = run_fresh("boot_registered_by_nobody_first",
                     run_options{palrt::testing::preload_env(palrt::testing::artefact("PALRT_TEST_SHIM")), {}});
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "registered_by=preload"));
  // The bootstrap's own REGISTER found the process registered, which never looks like a
  // first registration on the fast path: without the record it would have counted (below).
  CHECK(has(c.out, "barrier_fast_path_inferred=0"));
  CHECK(has(c.out, "barrier_threads_at_registration=0"));
  // The cli suite checks the same with strace: no /proc open after the shim's registration.
}

TEST_CASE("bootstrap: a process registered by someone without a record is still counted") {
  if (!membarrier_available()) return;
  // The host registered before palrt, and no shim left a record: the census is what says how
  // many threads were alive (main alone here), as before the shim's record was taken.
  auto c = run_fresh("boot_registered_by_host_first");
  INFO(c.out, c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(has(c.out, "registered_by=bootstrap"));
  CHECK(has(c.out, "barrier_fast_path_inferred=0"));
  CHECK(field(c.out, "barrier_threads_at_registration") >= 1);
  // The same shim, present but turned off, leaves no record that it registered: counted too.
  std::vector<std::string> env = palrt::testing::preload_env(palrt::testing::artefact("PALRT_TEST_SHIM"));
  env.push_back("PALRT_PRELOAD=0");
  auto off = run_fresh("boot_registered_by_host_first", run_options{env, {}});
  INFO(off.out, off.err);
  REQUIRE(off.exit_code == 0);
  CHECK(field(off.out, "barrier_threads_at_registration") >= 1);
}

// bootstrap() counts the process's threads in /proc (open and read: cancellation points),
// shutdown() joins, the runtime's destructor collects: none of them may act on a request
// pending when they begin (bootstrap.hpp, "Cancellation").
template <class Driver>
int boot_with_request_pending(Driver with_request_pending) {
  bool clean = false;
  const palrt::testing::cancellation_outcome o = with_request_pending(
      [&] {
        startup::options opts;
        opts.count_threads_at_registration = true;
        auto rt = startup::bootstrap(opts);
        clean = rt->shutdown().clean();
      },
      {}, {});
  std::printf("returned=%d acted_after=%d clean=%d\n", o.returned, o.acted_after, clean);
  return 0;
}
PALRT_FRESH_PROCESS(boot_with_cancellation_pending) {
  return boot_with_request_pending(palrt::testing::call_with_cancel_pending);
}
PALRT_FRESH_PROCESS(boot_with_interruption_pending) {
  return boot_with_request_pending(palrt::testing::call_with_interrupt_pending);
}

TEST_CASE("bootstrap: bootstrap(), shutdown() and the runtime's destructor are not cancellation points nor "
          "interruption points") {
  for (const char* name : {"boot_with_cancellation_pending", "boot_with_interruption_pending"}) {
    CAPTURE(name);
    const auto c = run_fresh(name);
    CHECK(c.exit_code == 0);
    CHECK_MESSAGE(c.out == "returned=1 acted_after=1 clean=1\n", c.out << c.err);
  }
}

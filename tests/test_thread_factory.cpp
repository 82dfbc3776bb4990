// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "palrt/pal/internal/thread_factory_access.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"
#include "palrt/startup/internal/baselines.hpp"  // the registration policies
#include "privileges.hpp"
#include "kernel_support.hpp"
#include "cancellation.hpp"
#include "subprocess.hpp"

using namespace palrt;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;
using namespace std::chrono_literals;

namespace {

void start_and_join_one_thread() {
  auto t = pal::start_thread({"probe", 0}, [] {});
  t.join();
}

}  // namespace

PALRT_FRESH_PROCESS(factory_registers_first) {
  start_and_join_one_thread();
  const auto* st = pal::process_barrier_state_if_initialized();
  if (!st) return 2;
  // Counted only when the registration did not look fast (registration_census::if_slow);
  // a sanitizer's own thread starts at the first pthread_create, after registration.
  const bool one_thread = st->fast_path_inferred ? st->threads_at_registration == 0 : st->threads_at_registration == 1;
  std::printf("registered=%d one_thread=%d strategy=%s pe=%d\n", st->registered, one_thread,
              std::string(pal::to_string(st->strategy)).c_str(), pal::membarrier::private_expedited().error);
  return 0;
}

PALRT_FRESH_PROCESS(factory_deferred) {
  pal::internal::set_registration_policy(pal::internal::registration_policy::deferred);
  start_and_join_one_thread();
  std::printf("initialized=%d pe=%d\n", pal::process_barrier_state_if_initialized() != nullptr,
              pal::membarrier::private_expedited().error);
  return 0;
}

PALRT_FRESH_PROCESS(factory_never) {
  pal::internal::set_registration_policy(pal::internal::registration_policy::never);
  start_and_join_one_thread();
  const auto* st = pal::process_barrier_state_if_initialized();
  if (!st) return 2;
  std::printf("registered=%d strategy=%s pe=%d\n", st->registered, std::string(pal::to_string(st->strategy)).c_str(),
              pal::membarrier::private_expedited().error);
  return 0;
}

PALRT_FRESH_PROCESS(factory_under_rlimit_nproc) {
  if (!palrt::testing::limit_tasks(1)) return 2;
  try {
    start_and_join_one_thread();
    std::printf("started\n");
  } catch (const pal::thread_start_error& e) {
    std::printf("error=%d name=%s what=%s\n", e.code().value(), e.thread_name().c_str(), e.what());
  }
  return 0;
}

TEST_CASE("thread factory: registers for membarrier before the process's first thread exists" *
          palrt::testing::fallback_case) {
  auto child = run_fresh("factory_registers_first");
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  if (membarrier_available())
    CHECK(child.out.find("registered=1 one_thread=1 strategy=membarrier pe=0") != std::string::npos);
  else
    CHECK(child.out.find("registered=0") != std::string::npos);
}

TEST_CASE("thread factory: the deferred policy (threads-first) leaves registration to the host" *
          palrt::testing::fallback_case) {
  auto child = run_fresh("factory_deferred");
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  CHECK(child.out.find("initialized=0") != std::string::npos);
  if (membarrier_available()) CHECK(child.out.find("pe=" + std::to_string(EPERM)) != std::string::npos);
}

TEST_CASE("thread factory: the never policy (no-membarrier) sets up a fallback barrier and does not register" *
          palrt::testing::fallback_case) {
  auto child = run_fresh("factory_never");
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  CHECK(child.out.find("registered=0") != std::string::npos);
  CHECK(child.out.find("strategy=membarrier") == std::string::npos);
  if (membarrier_available()) CHECK(child.out.find("pe=" + std::to_string(EPERM)) != std::string::npos);
}

TEST_CASE("thread factory: threads carry their name (cut to 15 characters) and their stack size") {
  std::string comm;
  std::size_t stack = 0;
  auto t = pal::start_thread({"palrt-a-very-long-thread-name", 512 * 1024}, [&] {
    std::ifstream in("/proc/thread-self/comm");
    std::getline(in, comm);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &stack);
      pthread_attr_destroy(&attr);
    }
  });
  CHECK(t.name() == "palrt-a-very-lo");
  t.join();
  CHECK(comm == "palrt-a-very-lo");
  CHECK(stack >= 512 * 1024);
}

TEST_CASE("thread factory: join_for times out on a running thread and joins a finished one") {
  pal::wake_event go;
  auto t = pal::start_thread({"slow", 0}, [&] { go.wait(); });
  CHECK_FALSE(t.join_for(std::chrono::milliseconds(20)));
  CHECK(t.joinable());
  go.set();
  CHECK(t.join_for(std::chrono::seconds(10)));
  CHECK_FALSE(t.joinable());
}

namespace {
// A thread_local whose destructor reports that it runs and then waits to be let go.
pal::wake_event* exit_entered = nullptr;
pal::wake_event* exit_may_finish = nullptr;
struct blocks_in_its_destructor {
  ~blocks_in_its_destructor() {
    exit_entered->set();
    exit_may_finish->wait();
  }
};

// join_for() against a thread held in a thread_local destructor: first timed out, then let go.
void join_a_thread_held_on_its_way_out() {
  pal::wake_event entered, may_finish;
  exit_entered = &entered;
  exit_may_finish = &may_finish;
  auto t = pal::start_thread({"held-at-exit", 0}, [] {
    thread_local blocks_in_its_destructor held;
    (void)&held;
  });
  REQUIRE(entered.wait_for(10s));
  // The body has returned; its thread_local destructor has not: the thread has not finished.
  CHECK_FALSE(t.join_for(20ms));
  CHECK(t.joinable());
  may_finish.set();
  CHECK(t.join_for(10s));
  CHECK_FALSE(t.joinable());
}
}  // namespace

TEST_CASE("thread factory: join_for's timeout covers the thread's way out (a thread_local destructor that blocks)") {
  join_a_thread_held_on_its_way_out();
}

namespace {
struct exit_key_hook_log {
  std::mutex lock;
  std::vector<std::string> seen;
  void add(const char* what) noexcept {
    std::lock_guard l(lock);
    seen.emplace_back(what);
  }
};
}  // namespace

TEST_CASE("thread factory: without a pthread key for the exit event, threads still join, hooks in order") {
  pal::internal::thread_factory_access::refuse_exit_key(true);
  struct restore {
    ~restore() { pal::internal::thread_factory_access::refuse_exit_key(false); }
  } restored;
  exit_key_hook_log log;
  const pal::thread_hooks old =
      pal::set_thread_hooks({[](void* c) noexcept { static_cast<exit_key_hook_log*>(c)->add("start"); },
                             [](void* c) noexcept { static_cast<exit_key_hook_log*>(c)->add("exit"); }, &log});
  pal::wake_event go;
  auto t = pal::start_thread({"no-exit-key", 0}, [&] {
    go.wait();
    log.add("body");
  });
  CHECK_FALSE(t.join_for(20ms));
  go.set();
  CHECK(t.join_for(10s));
  CHECK_FALSE(t.joinable());
  pal::set_thread_hooks(old);
  CHECK(log.seen == std::vector<std::string>{"start", "body", "exit"});
}

// A joinable managed_thread is never detached behind its owner's back: destroying one, or
// assigning over one, terminates with a message (as std::thread does). Each in a fresh process.
namespace {
pal::wake_event never_set;  // what the abandoned threads wait on: lives until the process ends
}  // namespace

PALRT_FRESH_PROCESS(managed_thread_destroyed_joinable) {
  {
    auto t = pal::start_thread({"left-joinable", 0}, [] { never_set.wait(); });
  }
  return 0;  // not reached after the fix: the destructor terminated
}

PALRT_FRESH_PROCESS(managed_thread_assigned_over_joinable) {
  auto t = pal::start_thread({"assigned-over", 0}, [] { never_set.wait(); });
  t = pal::managed_thread{};
  return 0;
}

TEST_CASE("thread factory: a managed_thread destroyed or assigned over while joinable terminates with a message") {
  struct expectation {
    const char* fresh;
    const char* message;
  };
  for (const expectation e : {expectation{"managed_thread_destroyed_joinable",
                                          "palrt: managed_thread 'left-joinable' destroyed while joinable"},
                              expectation{"managed_thread_assigned_over_joinable",
                                          "palrt: managed_thread 'assigned-over' assigned over while joinable"}}) {
    const std::string fresh = e.fresh;
    CAPTURE(fresh);
    const auto r = run_fresh(fresh);
    CHECK(r.term_signal == SIGABRT);
    CHECK_MESSAGE(r.err.find(e.message) != std::string::npos, r.err);
    CHECK(r.err.find("join() or detach() it first") != std::string::npos);
  }
}

TEST_CASE("thread factory: detach() is explicit; the thread runs on, and its managed_thread may go") {
  auto go = std::make_shared<pal::wake_event>();
  auto done = std::make_shared<pal::wake_event>();
  {
    auto t = pal::start_thread({"detached", 0}, [go, done] {
      go->wait();
      done->set();
    });
    t.detach();
    CHECK_FALSE(t.joinable());
    t.join();  // does nothing once detached
    CHECK(t.join_for(std::chrono::milliseconds(0)));
  }
  go->set();
  CHECK(done->wait_for(std::chrono::seconds(10)));
}

TEST_CASE("thread factory: a refused thread start is a thread_start_error with the errno and the name") {
  pal::internal::thread_factory_access::inject_thread_start_failure(0, EAGAIN);
  try {
    start_and_join_one_thread();
    FAIL("start_thread did not fail");
  } catch (const pal::thread_start_error& e) {
    CHECK(e.code().value() == EAGAIN);
    CHECK(e.thread_name() == "probe");
    CHECK(std::string(e.what()).find("probe") != std::string::npos);
  }
  start_and_join_one_thread();  // the injected fault fires once
}

TEST_CASE("thread factory: RLIMIT_NPROC makes the kernel refuse the thread; the error says EAGAIN") {
  auto child = run_fresh("factory_under_rlimit_nproc", {palrt::testing::privilege_drop_env(), {}});
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  CHECK(child.out.find("error=" + std::to_string(EAGAIN) + " name=probe") != std::string::npos);
}

namespace {

// What the hooks saw, per thread (tid), in order: "start", then the body's "body", "exit".
struct hook_log {
  std::mutex lock;
  std::vector<std::pair<long, std::string>> events;
  void add(const char* what) {
    std::lock_guard g(lock);
    events.emplace_back(static_cast<long>(::syscall(SYS_gettid)), what);
  }
};

}  // namespace

TEST_CASE("thread factory: a host's start and exit hooks run on each new thread around its body") {
  hook_log a, b;
  auto start = [](void* log) noexcept { static_cast<hook_log*>(log)->add("start"); };
  auto exit = [](void* log) noexcept { static_cast<hook_log*>(log)->add("exit"); };
  const pal::thread_hooks before = pal::set_thread_hooks({start, exit, &a});
  std::vector<pal::managed_thread> threads;
  for (int i = 0; i < 3; ++i) threads.push_back(pal::start_thread({"hooked"}, [&a] { a.add("body"); }));
  // A thread started with a's hooks keeps them when they are replaced while it runs.
  pal::wake_event replaced, go;
  pal::managed_thread straddling = pal::start_thread({"straddling"}, [&] {
    replaced.wait();
    a.add("body");
  });
  const pal::thread_hooks previous = pal::set_thread_hooks({start, exit, &b});
  CHECK(previous.context == &a);
  replaced.set();
  pal::managed_thread later = pal::start_thread({"later"}, [&b] { b.add("body"); });
  for (auto& t : threads) t.join();
  straddling.join();
  later.join();
  pal::set_thread_hooks(before);

  std::map<long, std::vector<std::string>> by_thread;
  for (auto& [tid, what] : a.events) by_thread[tid].push_back(what);
  CHECK(by_thread.size() == 4);
  for (auto& [tid, seen] : by_thread) {
    CAPTURE(tid);
    CHECK(seen == std::vector<std::string>{"start", "body", "exit"});
  }
  REQUIRE(b.events.size() == 3);
  CHECK(b.events[0].second == "start");
  CHECK(b.events[1].second == "body");
  CHECK(b.events[2].second == "exit");
  // Removed: a thread started now runs no hook.
  const std::size_t logged = a.events.size() + b.events.size();
  pal::managed_thread bare = pal::start_thread({"bare"}, [] {});
  bare.join();
  CHECK(a.events.size() + b.events.size() == logged);
}

// --- Cancellation (thread_factory.hpp, managed_thread) ------------------------------------

namespace {
palrt::pal::wake_event* lingering = nullptr;
palrt::pal::wake_event* may_leave = nullptr;
// Holds its thread on the way out, after its body returned: Boost's join then waits for it.
void linger() {
  lingering->set();
  may_leave->wait();
}
struct lingers_in_its_destructor {
  ~lingers_in_its_destructor() { linger(); }
};

// Joins a thread that is still on its way out (its body returned, so join_for() has seen it
// finish) from a thread with a request pending. A join unwound half done leaves the
// managed_thread joinable, which terminates at the end: hence a process of its own.
template <class Driver>
int join_a_lingering_thread(Driver with_request_pending, const std::function<void()>& body) {
  palrt::pal::wake_event entered_exit, leave;
  lingering = &entered_exit;
  may_leave = &leave;
  palrt::pal::managed_thread t = palrt::pal::start_thread({"palrt-lingerer", 0}, body);
  if (!entered_exit.wait_for(10s)) return 3;
  bool joined = false;
  const palrt::testing::cancellation_outcome o =
      with_request_pending([&] { joined = t.join_for(10s); }, {}, [&] { leave.set(); });
  std::printf("returned=%d acted_after=%d joined=%d\n", o.returned, o.acted_after, joined);
  std::fflush(stdout);
  return 0;
}
}  // namespace

// The thread lingers in a thread_local's destructor, after Boost's own exit: the join waits
// for it on the thread's exit event, and then in pthread_join(), a cancellation point.
PALRT_FRESH_PROCESS(join_with_cancellation_pending) {
  return join_a_lingering_thread(palrt::testing::call_with_cancel_pending, [] {
    thread_local lingers_in_its_destructor held;
    (void)&held;
  });
}

// The thread lingers in a Boost at_thread_exit function: Boost's join waits for it on a
// boost::condition_variable, an interruption point.
PALRT_FRESH_PROCESS(join_with_interruption_pending) {
  return join_a_lingering_thread(palrt::testing::call_with_interrupt_pending,
                                 [] { boost::this_thread::at_thread_exit(&linger); });
}

TEST_CASE("cancellation: join_for() is not a cancellation point, also while the thread is still on its way out") {
  const auto c = palrt::testing::run_fresh("join_with_cancellation_pending");
  CHECK(c.term_signal == 0);
  CHECK(c.exit_code == 0);
  CHECK_MESSAGE(c.out == "returned=1 acted_after=1 joined=1\n", c.out << c.err);
}

TEST_CASE("cancellation: join_for() is not a Boost interruption point, also while the thread is still on its way out") {
  const auto c = palrt::testing::run_fresh("join_with_interruption_pending");
  CHECK(c.term_signal == 0);
  CHECK(c.exit_code == 0);
  CHECK_MESSAGE(c.out == "returned=1 acted_after=1 joined=1\n", c.out << c.err);
}

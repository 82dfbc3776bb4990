#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "palrt/sync/finalizer_thread.hpp"
#include "palrt/sync/service_thread.hpp"
#include "palrt/sync/sync_manager.hpp"
#include "thread_state.hpp"

using namespace palrt;
using namespace std::chrono_literals;
using palrt::testing::thread_exists;
using palrt::testing::thread_state;

namespace {

// Waits (bounded) until the thread sleeps in the kernel.
bool becomes_idle(pid_t tid) {
  for (int i = 0; i < 2000; ++i) {
    if (thread_state(tid) == 'S') return true;
    usleep(1000);
  }
  return false;
}

}  // namespace

TEST_CASE("service thread: start() returns with the thread running, and it sleeps while idle") {
  sync::service_thread t("svc-idle", nullptr);
  t.start();
  REQUIRE(t.started());
  REQUIRE(t.tid() != 0);
  CHECK(becomes_idle(t.tid()));
  // Idle means asleep, not spinning: the loop has not woken up by itself.
  usleep(20000);
  CHECK(t.wakeups() == 0);
  CHECK(thread_state(t.tid()) == 'S');
  pid_t tid = t.tid();
  CHECK(t.stop(2s));
  CHECK_FALSE(thread_exists(tid));
}

TEST_CASE("service thread: every wake-up runs the work on the service thread; stop joins it") {
  std::atomic<int> runs{0};
  std::atomic<pid_t> ran_on{0};
  sync::service_thread t("svc-work", [&](const std::atomic<bool>&) {
    ran_on = static_cast<pid_t>(gettid());
    runs.fetch_add(1);
  });
  t.start();
  for (int i = 0; i < 100; ++i) {
    int before = runs.load();
    t.wake();
    for (int spin = 0; spin < 20000 && runs.load() == before; ++spin) usleep(50);
  }
  CHECK_MESSAGE(runs.load() == 100, "work runs seen: " << runs.load() << " of 100 wake-ups");
  CHECK(ran_on.load() == t.tid());
  CHECK(t.stop(2s));
}

TEST_CASE("service thread: stop is bounded; a thread that overstays is detached and touches nothing freed") {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  pid_t tid = 0;
  {
    sync::service_thread t("svc-slow", [finished](const std::atomic<bool>& stop) {
      // Ignores the stop request for a while, like a finalizer stuck in host code.
      auto until = std::chrono::steady_clock::now() + 300ms;
      while (std::chrono::steady_clock::now() < until) usleep(1000);
      finished->store(stop.load());
    });
    t.start();
    tid = t.tid();
    t.wake();
    usleep(20000);  // the work is running now
    auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(t.stop(50ms));
    CHECK(std::chrono::steady_clock::now() - t0 < 250ms);
  }  // the service_thread object is gone; the detached thread still runs on shared state
  for (int i = 0; i < 2000 && thread_exists(tid); ++i) usleep(1000);
  CHECK_FALSE(thread_exists(tid));
  CHECK(finished->load());  // it saw the stop request through state it co-owns
}

TEST_CASE("finalizer thread: named, started, asleep on its work event, woken by signal_work") {
  sync::finalizer_thread f;
  f.start();
  const pid_t tid = f.thread().tid();
  CHECK(f.thread().name() == "palrt-finalizer");
  CHECK(becomes_idle(tid));
  f.signal_work();
  for (int i = 0; i < 2000 && f.thread().wakeups() == 0; ++i) usleep(1000);
  CHECK(f.thread().wakeups() == 1);
  CHECK(f.stop(2s));
  CHECK_FALSE(thread_exists(tid));
}

TEST_CASE("sync manager: the worker starts lazily, once, and stops") {
  sync::sync_manager m;
  CHECK_FALSE(m.worker_started());
  m.ensure_worker_started();
  m.ensure_worker_started();  // idempotent
  CHECK(m.worker_started());
  CHECK(m.worker().name() == "palrt-syncmgr");
  CHECK(becomes_idle(m.worker().tid()));
  CHECK(m.stop(2s));
  CHECK(m.stop(2s));  // stopping twice is harmless
}

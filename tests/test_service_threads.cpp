// SPDX-License-Identifier: MIT
// The service-thread lifecycle shared by the finalizer and the sync manager's worker. No test
// orders events with a sleep: each waits, bounded, on an event the code under test signals or
// on a state the kernel reports.
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "palrt/pal/wake_event.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/finalizer_thread_access.hpp"
#include "palrt/sync/internal/sync_manager_access.hpp"
#include "palrt/sync/service_thread.hpp"
#include "palrt/sync/sync_manager.hpp"
#include "thread_state.hpp"

using namespace palrt;
using namespace std::chrono_literals;
using palrt::gc::internal::finalizer_thread_access;
using palrt::sync::internal::service_thread_access;
using palrt::sync::internal::sync_manager_access;
using palrt::testing::eventually;
using palrt::testing::thread_exists;
using palrt::testing::thread_state;

namespace {

// The thread sleeps in the kernel (waiting on its futex).
bool becomes_idle(pid_t tid) {
  return eventually([tid] { return thread_state(tid) == 'S'; });
}

}  // namespace

TEST_CASE("service thread: start() returns with the thread running, and it sleeps while idle") {
  sync::service_thread t("svc-idle", nullptr);
  t.start();
  REQUIRE(t.started());
  REQUIRE(t.tid() != 0);
  CHECK(becomes_idle(t.tid()));
  // Idle means asleep on its event, not looping: no wake-up ran the work.
  CHECK(service_thread_access::wakeups(t) == 0);
  pid_t tid = t.tid();
  CHECK(t.stop(2s));
  CHECK(eventually([tid] { return !thread_exists(tid); }));  // joined, then gone from /proc
}

TEST_CASE("service thread: every wake-up runs the work on the service thread; stop joins it") {
  std::atomic<int> runs{0};
  std::atomic<pid_t> ran_on{0};
  pal::wake_event ran;
  sync::service_thread t("svc-work", [&](const std::atomic<bool>&) {
    ran_on = static_cast<pid_t>(gettid());
    runs.fetch_add(1);
    ran.set();
  });
  t.start();
  int lost = 0;
  for (int i = 0; i < 100; ++i) {
    t.wake();
    if (!ran.wait_for(10s)) ++lost;
  }
  CHECK_MESSAGE(lost == 0, lost << " of 100 wake-ups ran no work");
  CHECK(runs.load() == 100);
  CHECK(ran_on.load() == t.tid());
  CHECK(t.stop(2s));
}

TEST_CASE("service thread: stop is bounded; a thread that overstays is detached and touches nothing freed") {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto entered = std::make_shared<pal::wake_event>();
  auto release = std::make_shared<pal::wake_event>();
  pid_t tid = 0;
  {
    sync::service_thread t("svc-slow", [=](const std::atomic<bool>& stop) {
      // Ignores the stop request until released, like a finalizer stuck in host code.
      entered->set();
      release->wait();
      finished->store(stop.load());
    });
    t.start();
    tid = t.tid();
    t.wake();
    REQUIRE(entered->wait_for(10s));  // the work is running now
    CHECK_FALSE(t.stop(50ms));
    CHECK_FALSE(t.started());
  }  // the service_thread object is gone; the detached thread still runs on state it co-owns
  release->set();
  CHECK(eventually([tid] { return !thread_exists(tid); }));
  CHECK(finished->load());  // it saw the stop request through state it co-owns
}

TEST_CASE("service thread: a restart after a detached overdue thread gets its own state; the old one still stops") {
  auto entered = std::make_shared<pal::wake_event>();
  auto release = std::make_shared<pal::wake_event>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto last_tid = std::make_shared<std::atomic<pid_t>>(0);
  auto ran = std::make_shared<pal::wake_event>();
  sync::service_thread t("svc-restart", [=](const std::atomic<bool>&) {
    if (calls->fetch_add(1) == 0) {  // the first run overstays the stop deadline
      entered->set();
      release->wait();
      return;
    }
    last_tid->store(static_cast<pid_t>(gettid()));
    ran->set();
  });
  t.start();
  const pid_t old_tid = t.tid();
  t.wake();
  REQUIRE(entered->wait_for(10s));
  REQUIRE_FALSE(t.stop(20ms));  // detached, still inside its work

  t.start();  // returns once the NEW thread runs its loop
  const pid_t new_tid = t.tid();
  CHECK(new_tid != 0);
  CHECK(new_tid != old_tid);

  // Released, the old thread finishes: its stop request was not reset by the restart.
  release->set();
  CHECK_MESSAGE(eventually([old_tid] { return !thread_exists(old_tid); }),
                "the detached thread kept running after the restart");
  // The new thread owns its own wake-ups: one wake, one run, on the new thread.
  t.wake();
  CHECK(ran->wait_for(10s));
  CHECK(last_tid->load() == new_tid);
  CHECK(t.stop(2s));
  CHECK(eventually([new_tid] { return !thread_exists(new_tid); }));  // joined, then gone from /proc
}

TEST_CASE("finalizer thread: named, started, asleep on its work event, woken by signal_work") {
  gc::handle_table table;
  gc::collector collector(table);
  gc::finalizer_thread f(collector);
  f.signal_work();  // before the start: nothing to wake, nothing breaks
  f.start();
  const auto& thread = finalizer_thread_access::thread(f);
  const pid_t tid = thread.tid();
  CHECK(thread.name() == "palrt-finalizer");
  CHECK(becomes_idle(tid));
  f.signal_work();
  CHECK(eventually([&] { return service_thread_access::wakeups(thread) == 1; }));
  CHECK(f.stop(2s));
  CHECK(eventually([tid] { return !thread_exists(tid); }));  // joined, then gone from /proc
}

TEST_CASE("sync manager: the worker starts lazily, once, and stops") {
  sync::sync_manager m;
  CHECK_FALSE(m.worker_started());
  m.ensure_worker_started();
  m.ensure_worker_started();  // idempotent
  CHECK(m.worker_started());
  const auto& worker = sync_manager_access::worker(m);
  CHECK(worker.name() == "palrt-syncmgr");
  CHECK(becomes_idle(worker.tid()));
  CHECK(m.stop(2s));
  CHECK(m.stop(2s));  // stopping twice is harmless
}

TEST_CASE("sync manager: threads racing to start the worker start exactly one") {
  for (int round = 0; round < 20; ++round) {
    sync::sync_manager m;
    const int before = palrt::testing::palrt_threads_alive_settled(0);
    std::atomic<int> ready{0};
    auto racer = [&] {
      ready.fetch_add(1);
      while (ready.load() < 3) {
      }
      m.ensure_worker_started();
    };
    std::thread a(racer), b(racer), c(racer);
    a.join();
    b.join();
    c.join();
    // Settled: the racers have exited but may still be leaving /proc/self/task, and a
    // directory read that races a task's removal can skip another task (seen: 0 read for 1
    // alive). A second worker would read 2 throughout and fail.
    CHECK(palrt::testing::palrt_threads_alive_settled(before + 1) == before + 1);
    CHECK(m.stop(2s));
    palrt::testing::palrt_threads_alive_settled(before);
  }
}

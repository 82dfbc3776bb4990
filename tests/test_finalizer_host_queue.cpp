// SPDX-License-Identifier: MIT
// The finalizer thread serving a host collector's own finalization queue
// (host_finalization_source): a stand-in for Boehm's, ready finalizers run by run_ready().
#include <doctest/doctest.h>
#include <pthread.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/pal/wake_event.hpp"
#include "cancellation.hpp"
#include "scale.hpp"

using namespace palrt::gc;
using namespace std::chrono_literals;

namespace {

// The host's side: finalizers made ready by its collection, run when run_ready() asks.
struct host_queue {
  std::mutex lock;
  std::deque<std::function<void()>> ready;
  std::atomic<int> calls{0};

  void push(std::function<void()> f) {
    std::lock_guard g(lock);
    ready.push_back(std::move(f));
  }
  static std::size_t run_ready(void* self) {
    auto& q = *static_cast<host_queue*>(self);
    q.calls.fetch_add(1);
    std::size_t ran = 0;
    for (;;) {
      std::function<void()> f;
      {
        std::lock_guard g(q.lock);
        if (q.ready.empty()) return ran;
        f = std::move(q.ready.front());
        q.ready.pop_front();
      }
      ++ran;  // counted even if it throws: it ran
      f();
    }
  }
  host_finalization_source source() { return {&host_queue::run_ready, this}; }
};

std::string thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

}  // namespace

TEST_CASE("finalizer, host queue: the host's ready finalizers run on the finalizer thread, and a wait covers them") {
  host_queue q;
  finalizer_thread f(q.source());
  CHECK(f.wait_for_pending_finalizers(0ns) == pending_finalizers::not_running);
  std::vector<std::string> ran_on;
  std::mutex ran_lock;
  q.push([&] {  // readied before the thread existed: run once it starts
    std::lock_guard g(ran_lock);
    ran_on.push_back(thread_name());
  });
  f.start();
  for (int i = 0; i < 10; ++i)
    q.push([&] {
      std::lock_guard g(ran_lock);
      ran_on.push_back(thread_name());
    });
  f.signal_work();  // the host's notifier
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::finalized);
  {
    std::lock_guard g(ran_lock);
    CHECK(ran_on.size() == 11);
    for (const std::string& name : ran_on) CHECK(name == "palrt-finalizer");
  }
  const finalizer_counters c = f.counters();
  CHECK(c.finalized == 11);
  CHECK(c.pending == 0);
  CHECK(f.stop());
  CHECK(f.wait_for_pending_finalizers(0ns) == pending_finalizers::not_running);
  CHECK_THROWS_AS(finalizer_thread(host_finalization_source{}), std::invalid_argument);
}

TEST_CASE("finalizer, host queue: concurrent waiters each see what was ready before their call run, exactly once") {
  // Producers ready finalizers (without signalling: the wait itself must drain them) and then
  // wait; each checks that every finalizer it readied has run. Reports lost and duplicated.
  host_queue q;
  finalizer_thread f(q.source());
  f.start();
  const int producers = 3, rounds = static_cast<int>(200 * palrt::testing::scale()), per_round = 5;
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(producers * rounds * per_round));
  std::atomic<int> not_run_at_return{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (int r = 0; r < rounds; ++r) {
        const int first = (p * rounds + r) * per_round;
        for (int k = 0; k < per_round; ++k)
          q.push([&runs, i = first + k] { runs[static_cast<std::size_t>(i)].fetch_add(1); });
        CHECK(f.wait_for_pending_finalizers() == pending_finalizers::finalized);
        for (int k = 0; k < per_round; ++k)
          if (runs[static_cast<std::size_t>(first + k)].load() == 0) not_run_at_return.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  int lost = 0, duplicated = 0;
  for (auto& r : runs) {
    if (r.load() == 0) ++lost;
    if (r.load() > 1) ++duplicated;
  }
  INFO(not_run_at_return.load() << " finalizers had not run when their producer's wait returned; " << lost << " lost, "
                                << duplicated << " run twice");
  CHECK(not_run_at_return.load() == 0);
  CHECK(lost == 0);
  CHECK(duplicated == 0);
  CHECK(f.counters().finalized == runs.size());
}

TEST_CASE(
    "finalizer, host queue: a throwing finalizer is contained and counted; a wait from a finalizer returns at once") {
  host_queue q;
  std::vector<std::string> seen;
  finalizer_options options;
  options.on_exception = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      seen.push_back(x.what());
    }
  };
  finalizer_thread f(q.source(), options);
  f.start();
  std::atomic<int> after{0};
  pending_finalizers from_inside = pending_finalizers::timed_out;
  q.push([] { throw std::runtime_error("host finalizer failed"); });
  q.push([&] { from_inside = f.wait_for_pending_finalizers(); });  // on the finalizer thread itself
  q.push([&] { after.fetch_add(1); });
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::finalized);
  CHECK(after.load() == 1);  // the thread went on after the exception
  CHECK(from_inside == pending_finalizers::finalized);
  const finalizer_counters c = f.counters();
  CHECK(c.exceptions == 1);
  CHECK(c.last_exception.find("host finalizer failed") != std::string::npos);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "host finalizer failed");
}

namespace {
// As for palrt's own queue (test_finalizer.cpp): the host queue's wait runs its course too.
template <class Driver>
void check_host_queue_wait_runs_its_course(Driver with_request_pending) {
  host_queue q;
  finalizer_thread f(q.source());
  f.start();
  palrt::pal::wake_event entered, may_return;
  std::atomic<int> ran{0};
  q.push([&] {
    entered.set();
    may_return.wait();
    ran.fetch_add(1);
  });
  for (int i = 0; i < 5; ++i) q.push([&] { ran.fetch_add(1); });
  f.signal_work();
  REQUIRE(entered.wait_for(10s));
  pending_finalizers result = pending_finalizers::timed_out;
  const palrt::testing::cancellation_outcome o =
      with_request_pending([&] { result = f.wait_for_pending_finalizers(); }, {}, [&] { may_return.set(); });
  CHECK_MESSAGE(o.returned,
                "wait_for_pending_finalizers() on a host queue was unwound: it acted as a cancellation point");
  CHECK(o.acted_after);
  CHECK(result == pending_finalizers::finalized);
  CHECK(ran.load() == 6);
  CHECK(f.stop());
}
}  // namespace

TEST_CASE("finalizer, host queue: wait_for_pending_finalizers() is not a cancellation point; a pending pthread_cancel "
          "acts after it returned") {
  check_host_queue_wait_runs_its_course(palrt::testing::call_with_cancel_pending);
}

TEST_CASE("finalizer, host queue: wait_for_pending_finalizers() is not a Boost interruption point either") {
  check_host_queue_wait_runs_its_course(palrt::testing::call_with_interrupt_pending);
}

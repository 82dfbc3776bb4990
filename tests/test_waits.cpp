// SPDX-License-Identifier: MIT
// The sync manager's waitable objects and waits: events, semaphores, mutexes (recursion and
// abandonment), thread handles, wait_one/any/all, timeouts, alertable waits and APCs, waits
// with a cancellation request pending, and every bad input the API documents. No test orders events with a sleep: a
// test that needs a thread to be blocked on an object waits (bounded) until the object has that waiter.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "palrt/sync/event.hpp"
#include "palrt/sync/internal/waits_access.hpp"
#include "palrt/sync/mutex.hpp"
#include "palrt/sync/semaphore.hpp"
#include "palrt/sync/thread_handle.hpp"
#include "palrt/sync/wait.hpp"
#include "cancellation.hpp"
#include "scale.hpp"
#include "subprocess.hpp"
#include "sync_error_of.hpp"
#include "thread_exit.hpp"
#include "thread_state.hpp"

using namespace palrt;
using namespace std::chrono_literals;
using sync::alertable;
using sync::event_handle;
using sync::event_reset;
using sync::handle;
using sync::mutex_handle;
using sync::semaphore_handle;
using sync::sync_error;
using sync::wait_status;
using sync::internal::waits_access;

using palrt::testing::error_of;
using palrt::testing::eventually;
using palrt::testing::host_thread_local;

namespace {

// The object has `n` threads blocked on it: what a test waits for instead of sleeping.
bool has_waiters(const handle& h, std::size_t n) {
  return eventually([&] { return waits_access::waiter_count(h) == n; });
}

bool signalled_now(const handle& h) { return sync::wait_one(h, 0ns).status == wait_status::signalled; }

}  // namespace

// --- Events ----------------------------------------------------------------------------------

TEST_CASE("auto-reset event: a set with nobody waiting is kept for one wait, and sets do not count up") {
  event_handle e(event_reset::automatic);
  CHECK(sync::wait_one(e, 0ns).status == wait_status::timed_out);
  e.set();
  e.set();  // coalesces
  CHECK(signalled_now(e));
  CHECK(sync::wait_one(e, 0ns).status == wait_status::timed_out);  // consumed by the one wait
}

TEST_CASE("auto-reset event: each set releases exactly one of the blocked waiters, oldest first") {
  event_handle e(event_reset::automatic);
  constexpr int waiters = 4;
  std::atomic<int> released{0};
  std::vector<int> order;
  std::mutex order_mutex;
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      if (sync::wait_one(e, 10s).status == wait_status::signalled) {
        std::lock_guard lock(order_mutex);
        order.push_back(i);
        released.fetch_add(1);
      }
    });
    REQUIRE(has_waiters(e, static_cast<std::size_t>(i + 1)));  // queued in this order
  }
  for (int i = 1; i <= waiters; ++i) {
    e.set();
    REQUIRE(eventually([&] { return released.load() == i; }));
    CHECK(waits_access::waiter_count(e) == static_cast<std::size_t>(waiters - i));
  }
  for (auto& t : threads) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  CHECK_FALSE(signalled_now(e));  // every set went to a waiter
}

TEST_CASE("manual-reset event: set releases every waiter and stays signalled until reset") {
  event_handle e(event_reset::manual);
  constexpr int waiters = 5;
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i)
    threads.emplace_back([&] { released += sync::wait_one(e, 10s).status == wait_status::signalled; });
  REQUIRE(has_waiters(e, waiters));
  e.set();
  for (auto& t : threads) t.join();
  CHECK(released.load() == waiters);
  CHECK(signalled_now(e));
  CHECK(signalled_now(e));
  e.reset();
  CHECK_FALSE(signalled_now(e));
  event_handle initially(event_reset::manual, true);
  CHECK(signalled_now(initially));
}

// --- Semaphores ------------------------------------------------------------------------------

TEST_CASE("semaphore: waits take counts, release adds them and returns the count before") {
  semaphore_handle s(2, 3);
  CHECK(signalled_now(s));
  CHECK(signalled_now(s));
  CHECK_FALSE(signalled_now(s));
  CHECK(s.release() == 0);
  CHECK(s.release(2) == 1);
  for (int i = 0; i < 3; ++i) CHECK(signalled_now(s));
  CHECK_FALSE(signalled_now(s));
}

TEST_CASE("semaphore: a release past the maximum is an error and leaves the count as it was") {
  semaphore_handle s(2, 3);
  std::string message;
  CHECK(error_of([&] { s.release(2); }, &message) == EOVERFLOW);
  CHECK(message.find("maximum 3") != std::string::npos);
  CHECK(error_of([&] { s.release(0); }) == EINVAL);
  // Still 2: two waits succeed, the third does not.
  CHECK(signalled_now(s));
  CHECK(signalled_now(s));
  CHECK_FALSE(signalled_now(s));
  CHECK(s.release(3) == 0);  // exactly up to the maximum is fine
}

TEST_CASE("semaphore: impossible initial counts or maxima are rejected") {
  CHECK(error_of([] { semaphore_handle(4, 3); }) == EINVAL);
  CHECK(error_of([] { semaphore_handle(-1, 3); }) == EINVAL);
  CHECK(error_of([] { semaphore_handle(0, 0); }) == EINVAL);
}

TEST_CASE("semaphore: a release wakes as many blocked waiters as it adds") {
  semaphore_handle s(0, 10);
  std::atomic<int> got{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] { got += sync::wait_one(s, 10s).status == wait_status::signalled; });
  REQUIRE(has_waiters(s, 3));
  s.release(2);
  REQUIRE(eventually([&] { return got.load() == 2; }));
  CHECK(waits_access::waiter_count(s) == 1);
  s.release(1);
  for (auto& t : threads) t.join();
  CHECK(got.load() == 3);
}

// --- Mutexes ---------------------------------------------------------------------------------

TEST_CASE("mutex: ownership is recursive, and another thread acquires it only after the last release") {
  mutex_handle m(sync::mutex_owner::nobody);
  CHECK(sync::wait_one(m).status == wait_status::signalled);
  CHECK(sync::wait_one(m).status == wait_status::signalled);  // again, by the owner
  auto other_acquires_now = [&] {
    wait_status s = wait_status::timed_out;
    std::thread([&] {
      s = sync::wait_one(m, 0ns).status;
      if (s == wait_status::signalled) m.release();
    }).join();
    return s == wait_status::signalled;
  };
  CHECK_FALSE(other_acquires_now());
  m.release();
  CHECK_FALSE(other_acquires_now());  // one acquisition still held
  m.release();
  CHECK(other_acquires_now());
}

TEST_CASE("mutex: a release by a thread that does not own it is an error and changes nothing") {
  mutex_handle m(sync::mutex_owner::calling_thread);
  std::string message;
  int error = 0;
  std::thread([&] { error = error_of([&] { m.release(); }, &message); }).join();
  CHECK(error == EPERM);
  CHECK(message.find("does not own") != std::string::npos);
  // Still ours: another thread cannot take it, we can release it.
  wait_status other = wait_status::signalled;
  std::thread([&] { other = sync::wait_one(m, 0ns).status; }).join();
  CHECK(other == wait_status::timed_out);
  m.release();
  CHECK(error_of([&] { m.release(); }) == EPERM);  // now nobody owns it
}

TEST_CASE("mutex: a thread that exits holding it abandons it; the next acquirer is told, once") {
  mutex_handle m(sync::mutex_owner::nobody);
  std::thread([&] {
    (void)sync::wait_one(m);
    (void)sync::wait_one(m);  // held twice: abandonment frees it whatever the count
  }).join();
  const auto first = sync::wait_one(m, 0ns);
  CHECK(first.status == wait_status::abandoned);
  CHECK(first.index == 0);
  m.release();                                                     // the new owner holds it once
  CHECK(sync::wait_one(m, 0ns).status == wait_status::signalled);  // consistent again
  m.release();
}

TEST_CASE("mutex: a waiter blocked on it wakes with abandoned when the owner exits") {
  mutex_handle m(sync::mutex_owner::nobody);
  event_handle owned(event_reset::manual), exit_now(event_reset::manual);
  std::thread owner([&] {
    (void)sync::wait_one(m);
    owned.set();
    (void)sync::wait_one(exit_now);
  });
  REQUIRE(sync::wait_one(owned, 10s).status == wait_status::signalled);
  sync::wait_result r;
  std::thread waiter([&] {
    r = sync::wait_one(m, 10s);
    if (r.status != wait_status::timed_out) m.release();
  });
  REQUIRE(has_waiters(m, 1));
  exit_now.set();
  owner.join();
  waiter.join();
  CHECK(r.status == wait_status::abandoned);
}

// --- wait_any / wait_all ---------------------------------------------------------------------

TEST_CASE("wait_any: the lowest signalled index wins and only that object is acquired") {
  event_handle a(event_reset::automatic), b(event_reset::automatic), c(event_reset::automatic);
  b.set();
  c.set();
  std::vector<handle> objects{a, b, c};
  const auto r = sync::wait_any(objects, 0ns);
  CHECK(r.status == wait_status::signalled);
  CHECK(r.index == 1);
  CHECK_FALSE(signalled_now(b));
  CHECK(signalled_now(c));  // untouched
  // A duplicate in wait_any is allowed: the lowest index is reported.
  a.set();
  std::vector<handle> twice{b, a, a};
  CHECK(sync::wait_any(twice, 0ns).index == 1);
}

TEST_CASE("wait_any: a blocked waiter wakes for whichever object is signalled, and learns which") {
  std::vector<event_handle> events;
  for (int i = 0; i < 64; ++i) events.emplace_back(event_reset::automatic);
  std::vector<handle> objects(events.begin(), events.end());
  for (const std::size_t which : {std::size_t{63}, std::size_t{0}, std::size_t{17}}) {
    sync::wait_result r;
    std::thread t([&] { r = sync::wait_any(objects, 10s); });
    REQUIRE(has_waiters(events[which], 1));
    events[which].set();
    t.join();
    CHECK(r.status == wait_status::signalled);
    CHECK(r.index == which);
    for (const auto& e : events) CHECK(waits_access::waiter_count(e) == 0);  // left every list
  }
}

TEST_CASE("wait_any and wait_all over the handles named in the call, of different kinds") {
  event_handle done(event_reset::manual);
  semaphore_handle slots(0, 1);
  // The handles are the callers': the call keeps no copy (wait_any({a, b}) binds references).
  auto r = sync::wait_any({done, slots}, 0ns);
  CHECK(r.status == wait_status::timed_out);
  slots.release(1);
  r = sync::wait_any({done, slots}, 0ns);
  CHECK(r.status == wait_status::signalled);
  CHECK(r.index == 1);
  CHECK(sync::wait_all({done, slots}, 0ns).status == wait_status::timed_out);  // done is not set
  slots.release(1);
  done.set();
  CHECK(sync::wait_all({done, slots}, 0ns).status == wait_status::signalled);
  // wait_all took the semaphore's count: only the manual event is left signalled.
  r = sync::wait_any({slots, done}, 0ns);
  CHECK(r.status == wait_status::signalled);
  CHECK(r.index == 1);
}

TEST_CASE("wait_all: takes all or none; with one object unsignalled it acquires nothing") {
  event_handle a(event_reset::automatic), b(event_reset::automatic);
  semaphore_handle s(1, 1);
  a.set();
  std::vector<handle> objects{a, b, s};
  CHECK(sync::wait_all(objects, 0ns).status == wait_status::timed_out);
  CHECK(sync::wait_all(objects, 20ms).status == wait_status::timed_out);
  CHECK(signalled_now(a));  // neither consumed by the failed waits
  CHECK(signalled_now(s));
  a.set();
  s.release();
  // Blocked on b while a and s are signalled: it still holds neither.
  sync::wait_result r;
  std::thread t([&] { r = sync::wait_all(objects, 10s); });
  REQUIRE(has_waiters(b, 1));
  CHECK(signalled_now(s));  // free for others meanwhile (and taken by this check)
  s.release();
  b.set();
  t.join();
  CHECK(r.status == wait_status::signalled);
  CHECK_FALSE(signalled_now(a));  // all three taken at once
  CHECK_FALSE(signalled_now(b));
  CHECK_FALSE(signalled_now(s));
}

TEST_CASE("wait_all: atomic under contention: no thread ever holds one of two mutexes through a wait_all") {
  // Threads take {m1, m2} with wait_all, or m1 or m2 alone; every holder checks it is alone
  // inside. A wait_all that took one mutex and waited for the other would be seen by a
  // single-mutex thread as a second holder, or deadlock it (a timed-out wait is counted).
  mutex_handle m1(sync::mutex_owner::nobody), m2(sync::mutex_owner::nobody);
  std::atomic<int> inside1{0}, inside2{0}, overlaps{0}, timeouts{0}, both_taken{0};
  const int rounds = static_cast<int>(300 * palrt::testing::scale());
  auto enter = [&](std::atomic<int>& inside) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
  };
  auto leave = [](std::atomic<int>& inside) { inside.fetch_sub(1); };
  auto worker = [&](int kind) {
    std::vector<handle> both{m1, m2};
    for (int i = 0; i < rounds; ++i) {
      const int k = (kind + i) % 3;
      if (k == 0) {
        if (sync::wait_all(both, 10s).status != wait_status::signalled) {
          timeouts.fetch_add(1);
          continue;
        }
        enter(inside1);
        enter(inside2);
        both_taken.fetch_add(1);
        leave(inside2);
        leave(inside1);
        m2.release();
        m1.release();
      } else {
        mutex_handle& m = k == 1 ? m1 : m2;
        std::atomic<int>& inside = k == 1 ? inside1 : inside2;
        if (sync::wait_one(m, 10s).status != wait_status::signalled) {
          timeouts.fetch_add(1);
          continue;
        }
        enter(inside);
        leave(inside);
        m.release();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  CHECK_MESSAGE(overlaps.load() == 0, overlaps.load() << " times two threads held one mutex");
  CHECK_MESSAGE(timeouts.load() == 0, timeouts.load() << " waits timed out (a partial wait_all would deadlock)");
  CHECK(both_taken.load() > 0);
}

// --- Timeouts and lost wake-ups --------------------------------------------------------------

TEST_CASE("timeouts: a wait times out, not before its deadline, within a generous bound") {
  event_handle never(event_reset::manual);
  for (const auto timeout : {1ms, 30ms}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = sync::wait_one(never, timeout);
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    CHECK(r.status == wait_status::timed_out);
    CHECK(elapsed >= timeout);
    CHECK(elapsed < 5s);  // the bound: a lost deadline would hang far longer
  }
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(sync::sleep_for(20ms) == wait_status::timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 >= 20ms);
  CHECK(waits_access::waiter_count(never) == 0);  // the timed-out waits left
}

TEST_CASE("no lost wake-up: a set racing the timeout is either taken by the wait or still there") {
  // Every set is accounted for exactly once: the racing wait reports it (signalled), or it
  // reports timed_out and the event is still signalled afterwards.
  event_handle e(event_reset::automatic);
  const int rounds = static_cast<int>(400 * palrt::testing::scale());
  int taken = 0, left = 0, lost = 0;
  for (int i = 0; i < rounds; ++i) {
    event_handle go(event_reset::manual);
    std::thread setter([&] {
      (void)sync::wait_one(go);
      e.set();
    });
    go.set();
    const auto r = sync::wait_one(e, std::chrono::microseconds(i % 50));
    setter.join();
    if (r.status == wait_status::signalled) {
      ++taken;
    } else if (signalled_now(e)) {
      ++left;
    } else {
      ++lost;
    }
  }
  CHECK_MESSAGE(lost == 0, lost << " of " << rounds << " sets were lost (taken " << taken << ", left " << left << ")");
}

// --- Threads and APCs ------------------------------------------------------------------------

TEST_CASE("thread handle: signalled when the thread exits, not before") {
  sync::thread_handle th;
  event_handle opened(event_reset::manual), finish(event_reset::manual);
  pid_t tid = 0;
  std::thread t([&] {
    th = sync::thread_handle::current();
    tid = static_cast<pid_t>(::gettid());
    opened.set();
    (void)sync::wait_one(finish);
  });
  REQUIRE(sync::wait_one(opened, 10s).status == wait_status::signalled);
  CHECK(th.tid() == tid);
  CHECK_FALSE(th.has_exited());
  CHECK(sync::wait_one(th, 0ns).status == wait_status::timed_out);
  finish.set();
  CHECK(sync::wait_one(th, 10s).status == wait_status::signalled);
  CHECK(th.has_exited());
  t.join();
}

// --- Waits during a thread's exit ------------------------------------------------------------
// A host's thread_local, or a global object on the main thread, whose destructor waits: it
// runs after palrt's own per-thread state was set up, so the C++ runtime destroys it after
// palrt's thread_locals. The waits must still work (and the thread count as exited only
// once they are done).

TEST_CASE("thread exit: a thread_local made before the first wait may wait in its destructor") {
  event_handle e(event_reset::manual);
  semaphore_handle s(1, 1);
  mutex_handle m(sync::mutex_owner::nobody);
  e.set();
  wait_status on_event = wait_status::timed_out, on_semaphore = wait_status::timed_out,
              on_mutex = wait_status::timed_out, again = wait_status::timed_out;
  std::thread([&] {
    // Constructed first, so destroyed after everything the waits make on this thread.
    host_thread_local.at_exit = [&] {
      on_event = sync::wait_one(e, 10s).status;
      on_semaphore = sync::wait_one(s, 10s).status;
      on_mutex = sync::wait_one(m, 10s).status;
      m.release();
      const handle* both[] = {&e, &m};
      again = sync::wait_any(std::span<const handle* const>(both), 10s).status;  // takes the event only
    };
    (void)sync::wait_one(e);  // the thread's first wait
  }).join();
  CHECK(on_event == wait_status::signalled);
  CHECK(on_semaphore == wait_status::signalled);
  CHECK(on_mutex == wait_status::signalled);
  CHECK(again == wait_status::signalled);
  // The mutex was released, not abandoned: the next owner is not told of an abandonment.
  CHECK(sync::wait_one(m, 0ns).status == wait_status::signalled);
  m.release();
}

TEST_CASE("thread exit: comes after the thread_locals' destructors, which may still release a mutex the thread owns") {
  mutex_handle m(sync::mutex_owner::nobody);
  event_handle finish(event_reset::manual);
  sync::thread_handle th;
  int release_error = -1;
  std::thread t([&] {
    host_thread_local.at_exit = [&] {
      (void)sync::wait_one(finish);  // the test looks at the thread while it waits here
      release_error = error_of([&] { m.release(); });
    };
    th = sync::thread_handle::current();
    (void)sync::wait_one(m);  // held until the thread_local's destructor releases it
  });
  REQUIRE(has_waiters(finish, 1));
  CHECK_FALSE(th.has_exited());                                    // still in its exit, not done with it
  CHECK(sync::wait_one(m, 0ns).status == wait_status::timed_out);  // still its owner
  finish.set();
  CHECK(sync::wait_one(th, 10s).status == wait_status::signalled);
  t.join();
  CHECK(release_error == 0);
  CHECK(sync::wait_one(m, 0ns).status == wait_status::signalled);  // released, not abandoned
  m.release();
}

namespace {

// A global object's destructor that waits, on the main thread, after main() returned
// (exit() has run the main thread's thread_locals by then).
struct waits_after_main {
  event_handle e{event_reset::manual};
  semaphore_handle s{1, 1};
  mutex_handle m{sync::mutex_owner::nobody};
  mutex_handle held{sync::mutex_owner::calling_thread};  // acquired in main(), released here
  ~waits_after_main() {
    e.set();
    const bool ok = sync::wait_one(e, 10s).status == wait_status::signalled &&
                    sync::wait_one(s, 10s).status == wait_status::signalled &&
                    sync::wait_one(m, 10s).status == wait_status::signalled && error_of([&] { m.release(); }) == 0 &&
                    error_of([&] { held.release(); }) == 0;
    std::printf("%s\n", ok ? "waits after main: ok" : "waits after main: FAILED");
    std::fflush(stdout);
  }
};

}  // namespace

PALRT_FRESH_PROCESS(waits_in_global_destructor) {
  event_handle first(event_reset::manual);
  first.set();
  (void)sync::wait_one(first);     // the main thread's first wait
  static waits_after_main global;  // destroyed by exit(), after the thread_locals
  return 0;
}

TEST_CASE("process exit: a global object's destructor may wait after main() returns") {
  const auto r = palrt::testing::run_fresh("waits_in_global_destructor");
  CHECK(r.exit_code == 0);
  CHECK(r.term_signal == 0);
  CHECK(r.out == "waits after main: ok\n");
  CHECK_MESSAGE(r.err.empty(), r.err);
}

TEST_CASE("APC: runs on its thread only inside an alertable wait, which then reports alerted") {
  sync::thread_handle th;
  event_handle opened(event_reset::manual), gate(event_reset::manual);
  std::atomic<int> apc_runs{0};
  std::atomic<pid_t> ran_on{0};
  bool ran_during_plain_wait = true;
  wait_status plain = wait_status::timed_out, alertable_sleep = wait_status::timed_out;
  pid_t tid = 0;
  std::thread t([&] {
    tid = static_cast<pid_t>(::gettid());
    th = sync::thread_handle::current();
    opened.set();
    plain = sync::wait_one(gate, 10s).status;  // not alertable: the APC must wait
    ran_during_plain_wait = apc_runs.load() != 0;
    alertable_sleep = sync::sleep_for(10s, alertable::yes);
  });
  REQUIRE(sync::wait_one(opened, 10s).status == wait_status::signalled);
  REQUIRE(has_waiters(gate, 1));
  sync::queue_apc(th, [&] {
    ran_on = static_cast<pid_t>(::gettid());
    apc_runs.fetch_add(1);
  });
  gate.set();
  t.join();
  CHECK(plain == wait_status::signalled);
  CHECK_FALSE(ran_during_plain_wait);
  CHECK(alertable_sleep == wait_status::alerted);
  CHECK(apc_runs.load() == 1);
  CHECK(ran_on.load() == tid);
}

TEST_CASE("APC: wakes a thread blocked in an alertable wait; queued earlier, the wait returns at once") {
  event_handle never(event_reset::manual), opened(event_reset::manual);
  sync::thread_handle th;
  std::atomic<int> order{0};
  int first = 0, second = 0;
  sync::wait_result blocked, early;
  event_handle queued_early(event_reset::manual);
  std::thread t([&] {
    th = sync::thread_handle::current();
    opened.set();
    blocked = sync::wait_one(never, 10s, alertable::yes);
    (void)sync::wait_one(queued_early);  // not alertable
    early = sync::wait_one(never, 10s, alertable::yes);
  });
  REQUIRE(sync::wait_one(opened, 10s).status == wait_status::signalled);
  REQUIRE(has_waiters(never, 1));
  sync::queue_apc(th, [&] { first = ++order; });
  REQUIRE(eventually([&] { return waits_access::waiter_count(never) == 0; }));
  REQUIRE(has_waiters(queued_early, 1));
  sync::queue_apc(th, [&] { second = ++order; });
  sync::queue_apc(th, [&] { ++order; });
  queued_early.set();
  t.join();
  CHECK(blocked.status == wait_status::alerted);
  CHECK(early.status == wait_status::alerted);
  CHECK(first == 1);
  CHECK(second == 2);  // in the order queued
  CHECK(order.load() == 3);
}

TEST_CASE(
    "APC: pending APCs run before an alertable wait looks at its objects; with none pending the signal is reported") {
  event_handle e(event_reset::manual, true);
  sync::queue_apc(sync::thread_handle::current(), [] {});
  // The APC is pending, so an alertable wait runs it and reports alerted: Win32's order.
  CHECK(sync::wait_one(e, 0ns, alertable::yes).status == wait_status::alerted);
  // Nothing pending now: the signal is reported.
  CHECK(sync::wait_one(e, 0ns, alertable::yes).status == wait_status::signalled);
}

TEST_CASE("APC: queued to a thread that has exited is an error, and the function is not run") {
  sync::thread_handle th;
  std::thread([&] { th = sync::thread_handle::current(); }).join();
  REQUIRE(sync::wait_one(th, 10s).status == wait_status::signalled);
  bool ran = false;
  std::string message;
  CHECK(error_of([&] { sync::queue_apc(th, [&] { ran = true; }); }, &message) == ESRCH);
  CHECK(message.find("has exited") != std::string::npos);
  CHECK_FALSE(ran);
  CHECK(error_of([&] { sync::queue_apc(sync::thread_handle::current(), nullptr); }) == EINVAL);
}

// --- Cancellation (wait.hpp, "Cancellation") ---------------------------------------------------

namespace {

using palrt::testing::cancellation_outcome;

// The waits, each on a thread with a cancellation request (or a Boost interruption) pending
// when it begins: each must run its course and return what it would have without it, and the
// request act right after. The blocking ones are released once their thread is their waiter.
template <class Driver>
void check_waits_run_their_course(Driver with_request_pending) {
  event_handle unset(event_reset::manual), first(event_reset::automatic), second(event_reset::automatic);
  wait_status timed = wait_status::signalled, slept = wait_status::signalled, alerted_sleep = wait_status::signalled;
  sync::wait_result any, all;

  cancellation_outcome o = with_request_pending([&] { timed = sync::wait_one(unset, 1ms).status; }, {}, {});
  CHECK_MESSAGE(o.returned, "wait_one was unwound: it acted as a cancellation point");
  CHECK(o.acted_after);
  CHECK(timed == wait_status::timed_out);

  o = with_request_pending(
      [&] {
        any = sync::wait_any({unset, first});
      },
      [&] { return waits_access::waiter_count(first) == 1; }, [&] { first.set(); });
  CHECK_MESSAGE(o.returned, "wait_any (no timeout) was unwound");
  CHECK(o.acted_after);
  CHECK(any.status == wait_status::signalled);
  CHECK(any.index == 1);

  o = with_request_pending(
      [&] {
        all = sync::wait_all({first, second});
      },
      [&] { return waits_access::waiter_count(second) == 1; },
      [&] {
        first.set();
        second.set();
      });
  CHECK_MESSAGE(o.returned, "wait_all (no timeout) was unwound");
  CHECK(o.acted_after);
  CHECK(all.status == wait_status::signalled);
  CHECK_FALSE(signalled_now(first));  // acquired by the wait_all
  CHECK_FALSE(signalled_now(second));

  o = with_request_pending([&] { slept = sync::sleep_for(1ms); }, {}, {});
  CHECK_MESSAGE(o.returned, "sleep_for was unwound");
  CHECK(o.acted_after);
  CHECK(slept == wait_status::timed_out);

  // An alertable sleep without end, ended by an APC that does nothing of the kind.
  std::atomic<sync::thread_handle*> sleeper{nullptr};
  sync::thread_handle sleeper_handle;
  o = with_request_pending(
      [&] {
        sleeper_handle = sync::thread_handle::current();
        sleeper.store(&sleeper_handle, std::memory_order_release);
        alerted_sleep = sync::sleep_for(sync::infinite, alertable::yes);
      },
      {},
      [&] {
        REQUIRE(eventually([&] { return sleeper.load(std::memory_order_acquire) != nullptr; }));
        sync::queue_apc(*sleeper.load(std::memory_order_acquire), [] {});
      });
  CHECK_MESSAGE(o.returned, "an alertable sleep_for was unwound");
  CHECK(o.acted_after);
  CHECK(alerted_sleep == wait_status::alerted);
}

}  // namespace

TEST_CASE(
    "cancellation: no wait and no sleep_for is a cancellation point; a pending pthread_cancel acts after it returned") {
  check_waits_run_their_course(palrt::testing::call_with_cancel_pending);
}

TEST_CASE("cancellation: no wait and no sleep_for is a Boost interruption point; a pending interrupt() acts after it "
          "returned") {
  check_waits_run_their_course(palrt::testing::call_with_interrupt_pending);
}

TEST_CASE("cancellation: a cancellation point in an APC acts there; the thread leaves the wait, which holds nothing") {
  event_handle e(event_reset::automatic);
  std::atomic<sync::thread_handle*> waiter{nullptr};
  sync::thread_handle waiter_handle;
  std::atomic<bool> apc_ran{false};
  const cancellation_outcome o = palrt::testing::call_with_cancel_pending(
      [&] {
        waiter_handle = sync::thread_handle::current();
        waiter.store(&waiter_handle, std::memory_order_release);
        (void)sync::wait_one(e, sync::infinite, alertable::yes);
      },
      [&] { return waits_access::waiter_count(e) == 1; },
      [&] {
        sync::queue_apc(*waiter.load(std::memory_order_acquire), [&] {
          apc_ran.store(true);
          ::pthread_testcancel();  // host code: the pending request acts here
        });
      });
  CHECK(apc_ran.load());
  CHECK_FALSE(o.returned);  // unwound from inside the APC, out of the wait
  // The wait had ended and acquired nothing: the event no longer lists it, and a set is
  // there for the next wait (not consumed by the dead thread's wait).
  CHECK(waits_access::waiter_count(e) == 0);
  e.set();
  CHECK(signalled_now(e));
  CHECK(sync::wait_one(waiter_handle, 10s).status == wait_status::signalled);  // its thread has exited
}

// --- Bad input -------------------------------------------------------------------------------

TEST_CASE("bad input: too many handles, none, a closed one, duplicates in wait_all, a negative timeout") {
  event_handle a(event_reset::automatic, true), b(event_reset::automatic, true);
  std::string message;

  std::vector<handle> many(65, a);
  CHECK(error_of([&] { (void)sync::wait_any(many, 0ns); }, &message) == E2BIG);
  CHECK(message.find("65 handles, at most 64") != std::string::npos);
  CHECK(error_of([&] { (void)sync::wait_all(std::vector<handle>(65, a), 0ns); }) == E2BIG);

  CHECK(error_of([&] { (void)sync::wait_any(std::vector<handle>{}, 0ns); }, &message) == EINVAL);
  CHECK(message.find("no handles") != std::string::npos);

  event_handle closed(event_reset::manual);
  closed.close();
  CHECK(error_of([&] { (void)sync::wait_all(std::vector<handle>{a, closed}, 0ns); }, &message) == EBADF);
  CHECK(message.find("handle 1 is closed") != std::string::npos);
  CHECK(error_of([&] { (void)sync::wait_one(closed); }) == EBADF);
  CHECK(error_of([&] { closed.set(); }) == EBADF);
  event_handle moved(event_reset::manual);
  event_handle into(std::move(moved));
  CHECK(error_of([&] { moved.set(); }) == EBADF);

  handle b_again = b;  // a duplicate handle to the same object
  CHECK(error_of([&] { (void)sync::wait_all(std::vector<handle>{a, b, b_again}, 0ns); }, &message) == EINVAL);
  CHECK(message.find("handles 1 and 2 refer to the same object") != std::string::npos);

  CHECK(error_of([&] { (void)sync::wait_one(a, -1ns); }) == EINVAL);
  CHECK(error_of([&] { sync::sleep_for(-1ms); }) == EINVAL);

  // Nothing else was disturbed: both events are still signalled, nobody waits on them.
  CHECK(waits_access::waiter_count(a) == 0);
  CHECK(signalled_now(a));
  CHECK(signalled_now(b));
}

// --- Stress ----------------------------------------------------------------------------------

TEST_CASE("stress: producers release a semaphore, consumers wait on it among events; nothing lost or doubled") {
  semaphore_handle items(0, 1 << 30);
  event_handle stop(event_reset::manual);
  const int producers = 2, consumers = 3;
  const long per_producer = 2000 * palrt::testing::scale();
  std::atomic<long> consumed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      std::vector<handle> objects{stop, items};
      for (;;) {
        const auto r = sync::wait_any(objects, 10s);
        if (r.status != wait_status::signalled || r.index == 0) return;
        consumed.fetch_add(1);
      }
    });
  }
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (long i = 0; i < per_producer; ++i) items.release();
    });
  }
  const long expected = producers * per_producer;
  const bool all = eventually([&] { return consumed.load() == expected; }, 30s);
  stop.set();
  for (auto& t : threads) t.join();
  CHECK_MESSAGE(all, "consumed " << consumed.load() << " of " << expected);
  CHECK(consumed.load() == expected);
  CHECK_FALSE(signalled_now(items));  // nothing left over, nothing consumed twice
}

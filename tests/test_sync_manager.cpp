// SPDX-License-Identifier: MIT
// The sync manager: its priority work queue (post, invoke, post_after, cancel), the pools
// that keep a steady state free of allocation, the nested invoke the lease pattern exists
// for, stopping with work queued, and process handles with real children. No test orders
// events with a sleep: a test that needs the worker busy blocks it on an event it controls.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "palrt/core/clock.h"
#include "palrt/sync/event.hpp"
#include "palrt/sync/internal/sync_manager_access.hpp"
#include "palrt/sync/process_handle.hpp"
#include "palrt/sync/sync_manager.hpp"
#include "palrt/sync/wait.hpp"
#include "cancellation.hpp"
#include "scale.hpp"
#include "subprocess.hpp"
#include "sync_error_of.hpp"
#include "thread_exit.hpp"
#include "thread_state.hpp"

using namespace palrt;
using namespace std::chrono_literals;
using sync::event_handle;
using sync::event_reset;
using sync::sync_error;
using sync::wait_status;
using sync::work_priority;
using sync::internal::sync_manager_access;

extern char** environ;

using palrt::testing::error_of;
using palrt::testing::eventually;

namespace {

// Keeps the worker inside one work item until release(): items posted meanwhile queue up.
// The work item holds its own handles to both events: the gate may go out of scope while the
// item is still returning from its wait, and the events must outlive that.
class worker_gate {
 public:
  explicit worker_gate(sync::sync_manager& m) {
    m.post(work_priority::high, [entered = entered_, release = release_]() mutable {
      entered.set();
      (void)sync::wait_one(release);
    });
    REQUIRE(sync::wait_one(entered_, 10s).status == wait_status::signalled);
  }
  void release() { release_.set(); }

 private:
  event_handle entered_{event_reset::manual};
  event_handle release_{event_reset::manual};
};

pid_t spawn_shell(const std::string& script) {
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ);
  REQUIRE_MESSAGE(err == 0, "posix_spawn /bin/sh: " << err);
  return pid;
}

// A child that runs `script` once its stdin closes: it runs exactly as long as the test wants.
// *release is the pipe's write end; closing it lets the child go on.
pid_t spawn_shell_held(const std::string& script, int* release) {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
  const std::string held = "read line; " + script;
  const char* argv[] = {"/bin/sh", "-c", held.c_str(), nullptr};
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[0]);
  REQUIRE_MESSAGE(err == 0, "posix_spawn /bin/sh: " << err);
  *release = pipe_fds[1];
  return pid;
}

}  // namespace

// --- Work queue ------------------------------------------------------------------------------

// Each item counted its runs in runs[i]: reports what was lost and what ran twice.
template <class Runs>
void check_each_ran_once(const Runs& runs) {
  long lost = 0, doubled = 0;
  for (const auto& r : runs) {
    lost += r.load() == 0;
    doubled += r.load() > 1;
  }
  CHECK_MESSAGE(lost == 0, lost << " items never ran");
  CHECK_MESSAGE(doubled == 0, doubled << " items ran more than once");
}

TEST_CASE("post: starts the worker lazily and runs the work there") {
  sync::sync_manager m;
  CHECK_FALSE(m.worker_started());
  std::atomic<pid_t> ran_on{0};
  std::atomic<bool> on_worker{false};
  event_handle done(event_reset::manual);
  m.post(work_priority::normal, [&] {
    ran_on = static_cast<pid_t>(::gettid());
    on_worker = m.on_worker_thread();
    done.set();
  });
  REQUIRE(sync::wait_one(done, 10s).status == wait_status::signalled);
  CHECK(m.worker_started());
  CHECK(ran_on.load() == sync_manager_access::worker(m).tid());
  CHECK(on_worker.load());
  CHECK_FALSE(m.on_worker_thread());
  CHECK(m.stop(2s));
}

TEST_CASE("post: priorities run highest first, first in first out within one") {
  sync::sync_manager m;
  worker_gate gate(m);
  std::vector<std::string> order;  // only the worker touches it until the final invoke
  const auto record = [&](std::string s) { return [&order, s] { order.push_back(s); }; };
  m.post(work_priority::low, record("low-1"));
  m.post(work_priority::normal, record("normal-1"));
  m.post(work_priority::background, record("background-1"));
  m.post(work_priority::high, record("high-1"));
  m.post(work_priority::normal, record("normal-2"));
  m.post(work_priority::high, record("high-2"));
  m.post(work_priority::low, record("low-2"));
  gate.release();
  m.invoke(work_priority::background, [] {});  // runs after everything above
  CHECK(order ==
        std::vector<std::string>{"high-1", "high-2", "normal-1", "normal-2", "low-1", "low-2", "background-1"});
}

TEST_CASE("cancel: removes an item that has not started; not one that ran; a stale ticket cancels nothing") {
  sync::sync_manager m;
  worker_gate gate(m);
  std::atomic<int> ran{0};
  auto ticket = m.post(work_priority::normal, [&] { ran.fetch_add(1); });
  auto kept = m.post(work_priority::normal, [&] { ran.fetch_add(10); });
  CHECK(m.cancel(ticket));
  CHECK_FALSE(m.cancel(ticket));  // already cancelled
  CHECK_FALSE(m.cancel(sync::work_ticket{}));
  // The cancelled item's node goes back to the pool and serves the next post: the old ticket
  // must not cancel that one.
  auto reuse = m.post(work_priority::normal, [&] { ran.fetch_add(100); });
  CHECK_FALSE(m.cancel(ticket));
  gate.release();
  m.invoke(work_priority::background, [] {});
  CHECK(ran.load() == 110);
  CHECK_FALSE(m.cancel(kept));  // ran
  CHECK_FALSE(m.cancel(reuse));
}

TEST_CASE("cancel: a ticket of another manager cancels nothing, and both managers carry on") {
  sync::sync_manager mine, theirs;
  worker_gate gate(theirs);
  std::atomic<int> ran{0};
  const auto ticket = theirs.post(work_priority::normal, [&] { ran.fetch_add(1); });
  CHECK_FALSE(mine.cancel(ticket));
  gate.release();
  theirs.invoke(work_priority::background, [] {});
  CHECK(ran.load() == 1);              // the item stayed in its own queue, and ran there
  CHECK_FALSE(theirs.cancel(ticket));  // ran
  // Neither manager's queue or pool took the other's node.
  CHECK(mine.invoke(work_priority::normal, [] { return 2; }) == 2);
  mine.post(work_priority::normal, [&] { ran.fetch_add(10); });
  theirs.post(work_priority::normal, [&] { ran.fetch_add(100); });
  mine.invoke(work_priority::background, [] {});
  theirs.invoke(work_priority::background, [] {});
  CHECK(ran.load() == 111);
}

TEST_CASE("invoke: returns the result, rethrows the exception, on the worker") {
  sync::sync_manager m;
  CHECK(m.invoke(work_priority::normal, [] { return 42; }) == 42);
  CHECK(m.invoke(work_priority::high, [] { return std::string(100, 'x'); }) == std::string(100, 'x'));
  int target = 1;
  int& ref = m.invoke(work_priority::normal, [&]() -> int& { return target; });
  CHECK(&ref == &target);
  bool ran = false;
  m.invoke(work_priority::low, [&] { ran = true; });
  CHECK(ran);
  CHECK(m.invoke(work_priority::normal, [&] { return m.on_worker_thread(); }));
  struct custom_error : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  CHECK_THROWS_AS(m.invoke(work_priority::normal, []() -> int { throw custom_error("from the worker"); }),
                  custom_error);
  try {
    m.invoke(work_priority::normal, [] { throw std::logic_error("kept"); });
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) == "kept");
  }
  CHECK(m.invoke(work_priority::normal, [] { return 7; }) == 7);  // the worker carries on
}

TEST_CASE("invoke: nested from inside a work item runs (no deadlock) and takes a context of its own") {
  sync::sync_manager m;
  m.invoke(work_priority::normal, [] {});  // the worker's and this thread's first uses
  const std::uint64_t before = sync_manager_access::invoke_context_allocations();
  // Two levels deep on the worker: the outer invoke holds the worker's leased context, so the
  // inner one must allocate its own rather than overwrite it.
  const int r = m.invoke(work_priority::normal, [&] {
    const int inner = m.invoke(work_priority::high, [&] { return m.invoke(work_priority::low, [] { return 3; }) * 2; });
    return inner + 1;
  });
  CHECK(r == 7);
  const std::uint64_t nested = sync_manager_access::invoke_context_allocations() - before;
  CHECK(nested >= 1);  // the lease pattern's fallback
  CHECK(nested <= 2);
  // And back to steady state: no more allocations for plain invokes.
  const std::uint64_t after_nesting = sync_manager_access::invoke_context_allocations();
  for (int i = 0; i < 100; ++i) m.invoke(work_priority::normal, [] {});
  CHECK(sync_manager_access::invoke_context_allocations() == after_nesting);
}

// In a fresh process: what went wrong here before was a context kept in a slot already
// destroyed, which only LeakSanitizer, at exit, reports.
PALRT_FRESH_PROCESS(invoke_in_thread_local_destructor) {
  sync::sync_manager m;
  int late = 0;
  std::thread([&] {
    palrt::testing::host_thread_local.at_exit = [&] { late = m.invoke(work_priority::normal, [] { return 5; }); };
    m.invoke(work_priority::normal, [] {});  // the thread's first invoke leases its context
  }).join();
  std::printf("late invoke: %d\n", late);
  return 0;
}

TEST_CASE("invoke: a thread_local made before the thread's first invoke may invoke in its destructor") {
  const auto r = palrt::testing::run_fresh("invoke_in_thread_local_destructor");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "late invoke: 5\n");
  CHECK_MESSAGE(r.err.empty(), r.err);
}

TEST_CASE("invoke from the worker runs the items queued ahead of it first, in priority order") {
  sync::sync_manager m;
  std::vector<int> order;
  m.invoke(work_priority::normal, [&] {
    m.post(work_priority::high, [&] { order.push_back(1); });
    m.post(work_priority::low, [&] { order.push_back(3); });
    m.invoke(work_priority::normal, [&] { order.push_back(2); });
    order.push_back(4);
  });
  m.invoke(work_priority::background, [] {});
  CHECK(order == std::vector<int>{1, 2, 4, 3});
}

TEST_CASE("steady state: post reuses a bounded set of queue nodes, invoke reuses each thread's context") {
  sync::sync_manager m;
  std::atomic<long> executed{0};
  const long batch = 64;
  m.invoke(work_priority::background, [] {});  // this thread leases its invoke context
  const std::uint64_t contexts = sync_manager_access::invoke_context_allocations();
  // Rounds of a batch of posts, then an invoke that waits for them: at most a batch plus the
  // gate's item is ever queued at once.
  const long rounds = 200 * palrt::testing::scale();
  {
    worker_gate gate(m);  // the first batch is all queued at once
    for (long i = 0; i < batch; ++i) m.post(work_priority::normal, [&] { executed.fetch_add(1); });
    gate.release();
  }
  m.invoke(work_priority::background, [] {});  // the batch ran
  for (long r = 0; r < rounds; ++r) {
    for (long i = 0; i < batch; ++i) m.post(work_priority::normal, [&] { executed.fetch_add(1); });
    CHECK(m.invoke(work_priority::background, [r] { return r; }) == r);
  }
  CHECK(executed.load() == batch * (rounds + 1));
  // The pool grew to at most its bound and then reused its nodes: over 12,800 posts, fewer
  // than a hundred allocations, however the worker and this thread interleaved.
  const std::uint64_t bound = sync_manager_access::node_pool_bound(batch + 1);
  CHECK_MESSAGE(sync_manager_access::node_allocations(m) <= bound,
                sync_manager_access::node_allocations(m) << " queue nodes allocated; the bound is " << bound);
  CHECK_MESSAGE(sync_manager_access::invoke_context_allocations() == contexts,
                "invoke contexts allocated after the first");
}

TEST_CASE("post: an item that throws is counted and the worker carries on") {
  sync::sync_manager m;
  m.post(work_priority::normal, [] { throw std::runtime_error("posted"); });
  m.post(work_priority::normal, [] { throw 5; });
  CHECK(m.invoke(work_priority::background, [] { return 1; }) == 1);
  CHECK(m.stats().failed_items == 2);
}

TEST_CASE("post_after: runs once its delay has passed, not before; cancelled before, never") {
  sync::sync_manager m;
  event_handle done(event_reset::manual);
  std::int64_t ran_at = 0;
  std::atomic<bool> cancelled_ran{false};
  const std::int64_t posted_at = palrt_monotonic_ns();
  auto cancelled = m.post_after(20ms, work_priority::normal, [&] { cancelled_ran = true; });
  m.post_after(30ms, work_priority::normal, [&] {
    ran_at = palrt_monotonic_ns();
    done.set();
  });
  m.post_after(0ms, work_priority::low, [] {});                                           // due at once
  auto never = m.post_after(std::chrono::nanoseconds::max(), work_priority::low, [] {});  // clamped, not overflowed
  CHECK(m.cancel(cancelled));
  REQUIRE(sync::wait_one(done, 10s).status == wait_status::signalled);
  CHECK(ran_at - posted_at >= std::chrono::nanoseconds(30ms).count());
  m.invoke(work_priority::background, [] {});
  CHECK_FALSE(cancelled_ran.load());
  CHECK(m.cancel(never));
  CHECK(error_of([&] { m.post_after(-1ms, work_priority::normal, [] {}); }) == EINVAL);
}

TEST_CASE("stop: queued work is cancelled and counted; a waiting invoke throws ECANCELED; later work is refused") {
  sync::sync_manager m;
  worker_gate gate(m);
  std::atomic<int> ran{0};
  m.post(work_priority::normal, [&] { ran.fetch_add(1); });
  m.post_after(1h, work_priority::normal, [&] { ran.fetch_add(1); });
  int invoke_error = 0;
  const std::uint64_t queued_before = sync_manager_access::items_waiting(m);
  std::thread caller(
      [&] { invoke_error = error_of([&] { m.invoke(work_priority::low, [&] { ran.fetch_add(1); }); }); });
  REQUIRE(eventually([&] { return sync_manager_access::items_waiting(m) == queued_before + 1; }));  // it waits
  m.request_stop();
  gate.release();
  CHECK(m.stop(2s));
  caller.join();
  CHECK(invoke_error == ECANCELED);
  CHECK(ran.load() == 0);
  CHECK(m.stats().cancelled_at_stop == 3);  // the post, the timer, the invoke
  std::string message;
  CHECK(error_of([&] { m.post(work_priority::normal, [] {}); }, &message) == ESHUTDOWN);
  CHECK(message.find("stopped") != std::string::npos);
  CHECK(error_of([&] { m.invoke(work_priority::normal, [] {}); }) == ESHUTDOWN);
  m.ensure_worker_started();  // reopens
  CHECK(m.invoke(work_priority::normal, [] { return 5; }) == 5);
  CHECK(m.stop(2s));
}

TEST_CASE("lifecycle: a start after request_stop() alone waits for the old worker and serves work again") {
  sync::sync_manager m;
  CHECK(m.invoke(work_priority::normal, [] { return 1; }) == 1);
  const pid_t first = sync_manager_access::worker(m).tid();
  m.request_stop();
  CHECK(error_of([&] { m.post(work_priority::normal, [] {}); }) == ESHUTDOWN);
  m.ensure_worker_started();
  CHECK(m.invoke(work_priority::normal, [] { return static_cast<pid_t>(::gettid()); }) != first);
  CHECK(m.stop(2s));
  CHECK_FALSE(m.worker_started());
}

TEST_CASE("stress: several threads post and invoke at once; every item runs exactly once") {
  sync::sync_manager m;
  const int threads = 4;
  const long per_thread = 2000 * palrt::testing::scale();
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(threads * per_thread));
  std::vector<std::thread> posters;
  std::atomic<long> wrong_results{0};
  for (int t = 0; t < threads; ++t) {
    posters.emplace_back([&, t] {
      for (long i = 0; i < per_thread; ++i) {
        const std::size_t slot = static_cast<std::size_t>(t * per_thread + i);
        const auto p = static_cast<work_priority>(i % 4);
        if (i % 3 == 0) {
          if (m.invoke(p, [&runs, slot] { return runs[slot].fetch_add(1) + 1; }) != 1) wrong_results.fetch_add(1);
        } else {
          m.post(p, [&runs, slot] { runs[slot].fetch_add(1); });
        }
      }
    });
  }
  for (auto& p : posters) p.join();
  m.invoke(work_priority::background, [] {});
  check_each_ran_once(runs);
  CHECK(wrong_results.load() == 0);
}

// --- Lock-free hand-off, spinning and parking ------------------------------------------------

TEST_CASE("post: several producers at once: all queued items run highest priority first, each producer's FIFO kept") {
  sync::sync_manager m;
  const int producers = 4;
  const int per_producer = 400 * static_cast<int>(palrt::testing::scale());
  struct record {
    int producer, priority, seq;
  };
  std::vector<record> order;  // only the worker touches it until the final invoke
  order.reserve(static_cast<std::size_t>(producers * per_producer));
  {
    worker_gate gate(m);  // everything below is queued before any of it runs
    std::vector<std::thread> threads;
    for (int t = 0; t < producers; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < per_producer; ++i) {
          const int p = (i * 7 + t) % 4;  // every priority, interleaved differently per producer
          m.post(static_cast<work_priority>(p), [&order, t, p, i] { order.push_back({t, p, i}); });
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(sync_manager_access::items_waiting(m) == static_cast<std::uint64_t>(producers * per_producer));
    gate.release();
  }
  m.invoke(work_priority::background, [] {});  // after everything above
  REQUIRE(order.size() == static_cast<std::size_t>(producers * per_producer));
  long priority_inversions = 0, fifo_breaks = 0;
  std::vector<std::vector<int>> last_seq(producers, std::vector<int>(4, -1));
  for (std::size_t k = 0; k < order.size(); ++k) {
    const record& r = order[k];
    if (k > 0 && order[k - 1].priority < r.priority) ++priority_inversions;
    int& last = last_seq[static_cast<std::size_t>(r.producer)][static_cast<std::size_t>(r.priority)];
    if (r.seq <= last) ++fifo_breaks;
    last = r.seq;
  }
  CHECK_MESSAGE(priority_inversions == 0, priority_inversions << " items ran after a lower-priority one");
  CHECK_MESSAGE(fifo_breaks == 0, fifo_breaks << " items ran before an earlier item of their producer and priority");
}

TEST_CASE("post: producers racing a running worker: each item exactly once, each producer's FIFO kept per priority") {
  sync::sync_manager m;
  const int producers = 3;
  const int per_producer = 5000 * static_cast<int>(palrt::testing::scale());
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(producers * per_producer));
  // Per producer and priority, the last sequence number run: only the worker writes them.
  std::vector<std::vector<int>> last_seq(producers, std::vector<int>(4, -1));
  long fifo_breaks = 0;  // the worker's
  std::vector<std::thread> threads;
  for (int t = 0; t < producers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_producer; ++i) {
        const int p = (i + t) % 4;
        m.post(static_cast<work_priority>(p), [&, t, p, i] {
          runs[static_cast<std::size_t>(t * per_producer + i)].fetch_add(1);
          int& last = last_seq[static_cast<std::size_t>(t)][static_cast<std::size_t>(p)];
          if (i <= last) ++fifo_breaks;
          last = i;
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  m.invoke(work_priority::background, [] {});
  check_each_ran_once(runs);
  CHECK_MESSAGE(fifo_breaks == 0, fifo_breaks << " items ran before an earlier item of their producer and priority");
}

namespace {
enum class stale_ticket { cancelled_only, any };

// Posts `items` items with post_one(i, its run counter) while another thread cancels every
// other one as soon as its ticket is published, racing the worker, cancels it again, and
// cancels the ticket `stale_distance` items back (`any`: whatever became of it; or only one
// it cancelled). Then each item ran once or its cancel returned true, never both, never
// neither, and no second or stale cancel returned true.
template <class PostOne>
void race_cancels(sync::sync_manager& m, long stale_distance, stale_ticket stale, PostOne post_one) {
  const long items = 20000 * palrt::testing::scale();
  std::vector<std::atomic<long>> runs(static_cast<std::size_t>(items));
  std::vector<sync::work_ticket> tickets(static_cast<std::size_t>(items));
  std::vector<char> cancelled(static_cast<std::size_t>(items), 0);
  std::atomic<long> published{0};
  long second_cancels = 0;
  std::thread canceller([&] {
    for (long i = 0; i < items; i += 2) {
      // acquire: the ticket written before the release below.
      while (published.load(std::memory_order_acquire) <= i) sched_yield();
      const auto slot = static_cast<std::size_t>(i);
      cancelled[slot] = m.cancel(tickets[slot]);
      second_cancels += m.cancel(tickets[slot]);
      if (i < stale_distance) continue;
      const auto old = slot - static_cast<std::size_t>(stale_distance);
      if (stale == stale_ticket::any || cancelled[old]) second_cancels += m.cancel(tickets[old]);
    }
  });
  for (long i = 0; i < items; ++i) {
    const auto slot = static_cast<std::size_t>(i);
    tickets[slot] = post_one(i, runs[slot]);
    published.store(i + 1, std::memory_order_release);  // release: the ticket
  }
  canceller.join();
  m.invoke(work_priority::background, [] {});
  long ran_and_cancelled = 0, neither = 0, doubled = 0, cancelled_count = 0;
  for (std::size_t slot = 0; slot < runs.size(); ++slot) {
    const long r = runs[slot].load();
    doubled += r > 1;
    ran_and_cancelled += r == 1 && cancelled[slot];
    neither += r == 0 && !cancelled[slot];
    cancelled_count += cancelled[slot];
  }
  CHECK_MESSAGE(ran_and_cancelled == 0, ran_and_cancelled << " items ran although their cancel returned true");
  CHECK_MESSAGE(neither == 0, neither << " items neither ran nor were cancelled (lost)");
  CHECK_MESSAGE(doubled == 0, doubled << " items ran more than once");
  CHECK_MESSAGE(second_cancels == 0, second_cancels << " repeated or stale cancels returned true");
  MESSAGE(cancelled_count << " of " << items / 2 << " cancels came before the worker");
}
}  // namespace

TEST_CASE("cancel: racing the worker, exactly one of 'cancel returned true' and 'the item ran' holds for each item") {
  sync::sync_manager m;
  // Every priority, so items of a lower one may still wait 1000 items later: only a ticket
  // cancelled already must not cancel again. Nodes are reused meanwhile, so stale tickets meet
  // nodes that serve newer items.
  race_cancels(m, 1000, stale_ticket::cancelled_only, [&m](long i, std::atomic<long>& runs) {
    return m.post(static_cast<work_priority>(i % 4), [&runs, i] {
      (void)i;  // 16 bytes of capture: a node, not the small-item ring
      runs.fetch_add(1);
    });
  });
  // Cancelled nodes go back to the pool (the worker meets them later, or the canceller hands
  // them back): rounds of posting and cancelling a batch reach a steady state, not a leak.
  const auto cancel_round = [&] {
    worker_gate gate(m);
    std::vector<sync::work_ticket> batch;
    for (int i = 0; i < 64; ++i) batch.push_back(m.post(work_priority::normal, [] {}));
    for (const auto& t : batch) CHECK(m.cancel(t));
    gate.release();
    // Runs after the worker met the cancelled nodes (they are queued ahead of it, at a higher
    // priority): until then they are still linked, and not the pool's.
    m.invoke(work_priority::background, [] {});
  };
  cancel_round();
  const std::uint64_t made = sync_manager_access::node_allocations(m);
  for (int r = 0; r < 50; ++r) cancel_round();
  CHECK_MESSAGE(sync_manager_access::node_allocations(m) == made, "cancelled items' nodes were not reused");
}

TEST_CASE("wake-up: an item posted while the worker parks (or is about to) always runs; no wake-up is lost") {
  sync::sync_manager m;
  // Read on the worker, inside an item: the worker's next park comes after it and counts.
  const auto parks_now = [&m] { return sync_manager_access::parks(m); };
  std::uint64_t parks = m.invoke(work_priority::normal, parks_now);
  const long rounds = 300 * palrt::testing::scale();
  event_handle done(event_reset::automatic);
  long lost = 0;
  for (long r = 0; r < rounds && lost == 0; ++r) {
    // The worker spins at most max_spin, then announces its park and counts it: post right
    // then, in the window between its announcement and its futex wait, or inside the wait.
    REQUIRE_MESSAGE(eventually([&] { return sync_manager_access::parks(m) > parks; }),
                    "the worker never parked (round " << r << ")");
    if (r % 2 == 0) {
      m.post(static_cast<work_priority>(r % 4), [&] {
        parks = parks_now();  // read by this thread after the event: published by set()
        done.set();
      });
      lost += sync::wait_one(done, 10s).status != wait_status::signalled;
    } else {
      parks = m.invoke(static_cast<work_priority>(r % 4), parks_now);
    }
  }
  CHECK_MESSAGE(lost == 0, "an item posted to a parking worker did not run within 10 s: a lost wake-up");
}

// --- Small items: the ring of 16-byte entries (internal/post_ring.hpp) -----------------------

namespace {

// Small items carry at most 8 bytes of captures: their own number, and they find the log
// through this pointer. Only the worker appends while items run; a test reads the log after
// an invoke that runs after them.
std::vector<std::uint64_t>* small_log = nullptr;

auto small_item(std::uint64_t code) {
  return [code] { small_log->push_back(code); };
}
// The same record from a node: 48 bytes of captures are too many for the ring.
auto large_item(std::uint64_t code) {
  return [code, pad = std::array<std::uint64_t, 5>{}] {
    (void)pad;
    small_log->push_back(code);
  };
}

// One callable type for many items: a ticket's slot comes round again with the same kind.
struct count_run {
  std::atomic<long>* runs;
  void operator()() const { runs->fetch_add(1); }
};

}  // namespace

TEST_CASE("post: one thread's small items (ring), large items and invokes at normal priority run in its order") {
  sync::sync_manager m;
  std::vector<std::uint64_t> log;
  small_log = &log;
  std::uint64_t code = 0;
  {
    worker_gate gate(m);  // all queued before any runs
    for (int round = 0; round < 50; ++round) {
      m.post(work_priority::normal, small_item(code++));
      m.post(work_priority::normal, small_item(code++));
      m.post(work_priority::normal, large_item(code++));
      m.post(work_priority::normal, small_item(code++));
    }
    CHECK(sync_manager_access::ring_items_waiting(m) == 150);  // the small ones took the ring
    gate.release();
  }
  // Racing a running worker, with this thread's invokes between its posts.
  for (int round = 0; round < 2000; ++round) {
    m.post(work_priority::normal, small_item(code++));
    if (round % 3 == 0) m.post(work_priority::normal, large_item(code++));
    if (round % 50 == 0) {
      const std::uint64_t mine = code++;
      m.invoke(work_priority::normal, [mine] { small_log->push_back(mine); });
    }
  }
  m.invoke(work_priority::background, [] {});  // after everything above
  long out_of_order = 0;
  for (std::size_t i = 0; i < log.size(); ++i) out_of_order += log[i] != i;
  CHECK(log.size() == code);
  CHECK_MESSAGE(out_of_order == 0, out_of_order << " items ran out of their thread's order");
  small_log = nullptr;
}

namespace {
// The worker held between its look at the ring and its look at the normal inbox.
std::atomic<bool> looks_armed{false}, looks_held{false}, looks_released{false};
void hold_between_looks() {
  if (!looks_armed.exchange(false)) return;
  looks_held.store(true);
  while (!looks_released.load()) sched_yield();
}
}  // namespace

TEST_CASE(
    "post: a large item then a small one, posted while the worker is between its two looks: the large one first") {
  // The worker looks at the ring, then at the nodes (work_queue.cpp). A thread that pushes a
  // node and writes a ring item between the two looks has the node found by the second: it
  // runs first. Looked at the other way round, the ring item would be seen and run first.
  sync::sync_manager m;
  std::vector<std::uint64_t> log;
  small_log = &log;
  m.invoke(work_priority::background, [] {});  // started
  sync_manager_access::between_ring_and_inbox_looks(&hold_between_looks);
  for (int round = 0; round < 10; ++round) {
    looks_held.store(false);
    looks_released.store(false);
    looks_armed.store(true);
    m.post(work_priority::low, [] {});  // the worker looks for work (it may have been already)
    REQUIRE_MESSAGE(eventually([] { return looks_held.load(); }), "round " << round << ": never held");
    m.post(work_priority::normal, large_item(2 * static_cast<std::uint64_t>(round)));
    m.post(work_priority::normal, small_item(2 * static_cast<std::uint64_t>(round) + 1));
    looks_released.store(true);
    m.invoke(work_priority::background, [] {});
  }
  sync_manager_access::between_ring_and_inbox_looks(nullptr);
  long out_of_order = 0;
  for (std::size_t i = 0; i < log.size(); ++i) out_of_order += log[i] != i;
  CHECK(log.size() == 20);
  CHECK_MESSAGE(out_of_order == 0, out_of_order << " items ran out of their thread's order");
  small_log = nullptr;
}

TEST_CASE("post: producers mixing small and large items racing the worker: each once, each producer's order kept") {
  sync::sync_manager m;
  const std::uint64_t producers = 3;
  const std::uint64_t per_producer = 5000 * static_cast<std::uint64_t>(palrt::testing::scale());
  std::vector<std::uint64_t> log;  // producer << 32 | sequence
  log.reserve(producers * per_producer);
  small_log = &log;
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < producers; ++t) {
    threads.emplace_back([&m, t, per_producer] {
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        if ((i + t) % 5 == 0) {
          m.post(work_priority::normal, large_item(t << 32 | i));
        } else {
          m.post(work_priority::normal, small_item(t << 32 | i));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  m.invoke(work_priority::background, [] {});
  std::vector<long> last(producers, -1);
  long order_breaks = 0;
  for (const std::uint64_t r : log) {
    const long seq = static_cast<long>(r & 0xffffffff);
    long& l = last[r >> 32];
    order_breaks += seq != l + 1;
    l = seq;
  }
  CHECK(log.size() == producers * per_producer);  // none lost, none twice (with the order check)
  CHECK_MESSAGE(order_breaks == 0, order_breaks << " items did not run right after their producer's previous one");
  small_log = nullptr;
}

TEST_CASE("post: small items that find the ring full go through nodes, and all keep their order") {
  sync::sync_manager m;
  std::vector<std::uint64_t> log;
  small_log = &log;
  const std::uint64_t items = sync_manager_access::ring_capacity() + 1000;
  {
    worker_gate gate(m);
    for (std::uint64_t i = 0; i < items; ++i) m.post(work_priority::normal, small_item(i));
    // Full: the worker lets posters reuse what it ran in steps of 64 items.
    CHECK(sync_manager_access::ring_items_waiting(m) > sync_manager_access::ring_capacity() - 64);
    CHECK(sync_manager_access::items_waiting(m) == items + 0);  // the rest in nodes
    gate.release();
  }
  m.invoke(work_priority::background, [] {});
  long out_of_order = 0;
  for (std::size_t i = 0; i < log.size(); ++i) out_of_order += log[i] != i;
  CHECK(log.size() == items);
  CHECK_MESSAGE(out_of_order == 0, out_of_order << " items ran out of order");
  small_log = nullptr;
}

TEST_CASE("cancel: a small item in the ring, exactly once; its ticket cancels nothing once its slot is reused") {
  sync::sync_manager m;
  std::atomic<long> runs{0};
  sync::work_ticket first, second;
  {
    worker_gate gate(m);
    first = m.post(work_priority::normal, count_run{&runs});
    second = m.post(work_priority::normal, count_run{&runs});
    REQUIRE(sync_manager_access::ring_items_waiting(m) == 2);
    CHECK(m.cancel(first));
    CHECK_FALSE(m.cancel(first));  // already cancelled
    gate.release();
  }
  const std::uint64_t parks = m.invoke(work_priority::normal, [&m] { return sync_manager_access::parks(m); });
  CHECK(runs.load() == 1);
  CHECK_FALSE(m.cancel(second));  // ran
  // Parked, the worker has told posters where it is: a lap of the ring now reaches the
  // cancelled item's slot again, with an item of the same kind there.
  REQUIRE(eventually([&] { return sync_manager_access::parks(m) > parks; }));
  {
    worker_gate gate(m);
    for (std::uint64_t i = 0; i < sync_manager_access::ring_capacity() - 1; ++i)
      (void)m.post(work_priority::normal, count_run{&runs});
    CHECK(sync_manager_access::ring_items_waiting(m) == sync_manager_access::ring_capacity() - 1);
    CHECK_FALSE(m.cancel(first));
    CHECK_FALSE(m.cancel(second));
    gate.release();
  }
  m.invoke(work_priority::background, [] {});
  CHECK(runs.load() == static_cast<long>(sync_manager_access::ring_capacity()));
}

TEST_CASE("cancel: small items racing the worker, exactly one of 'cancel returned true' and 'the item ran'") {
  sync::sync_manager m;
  // One priority: 5000 items later an item has long run or been cancelled, and its ticket
  // names a reused ring slot.
  race_cancels(m, 5000, stale_ticket::any,
               [&m](long, std::atomic<long>& runs) { return m.post(work_priority::normal, count_run{&runs}); });
}

TEST_CASE("stop: small items in the ring are cancelled and counted, never run; a restart serves them again") {
  sync::sync_manager m;
  std::atomic<long> runs{0};
  {
    worker_gate gate(m);
    (void)m.post(work_priority::normal, count_run{&runs});
    const sync::work_ticket t = m.post(work_priority::normal, count_run{&runs});
    (void)m.post(work_priority::normal, count_run{&runs});
    REQUIRE(sync_manager_access::ring_items_waiting(m) == 3);
    CHECK(m.cancel(t));
    m.request_stop();
    CHECK(error_of([&] { m.post(work_priority::normal, count_run{&runs}); }) == ESHUTDOWN);
    gate.release();
  }
  CHECK(m.stop(2s));
  CHECK(runs.load() == 0);
  CHECK(m.stats().cancelled_at_stop == 2);  // the cancelled one is cancel()'s, not the stop's
  m.ensure_worker_started();
  {
    worker_gate gate(m);
    (void)m.post(work_priority::normal, count_run{&runs});
    CHECK(sync_manager_access::ring_items_waiting(m) == 1);  // the ring serves the new worker
    gate.release();
  }
  m.invoke(work_priority::background, [] {});
  CHECK(runs.load() == 1);
  CHECK(m.stop(2s));
}

TEST_CASE(
    "stop: a worker detached at its deadline keeps the ring until it has cancelled its items; a new one uses nodes") {
  sync::sync_manager m;
  std::atomic<long> runs{0};
  event_handle entered(event_reset::manual), release(event_reset::manual);
  m.post(work_priority::high, [entered, release]() mutable {
    entered.set();
    (void)sync::wait_one(release);
  });
  REQUIRE(sync::wait_one(entered, 10s).status == wait_status::signalled);
  (void)m.post(work_priority::normal, count_run{&runs});
  (void)m.post(work_priority::normal, count_run{&runs});
  REQUIRE(sync_manager_access::ring_items_waiting(m) == 2);
  CHECK_FALSE(m.stop(1ms));  // held in the item: detached, the ring still its own
  m.ensure_worker_started();
  // The new worker serves small items through nodes: the ring's consumer is the old one.
  (void)m.post(work_priority::normal, count_run{&runs});
  m.invoke(work_priority::background, [] {});
  CHECK(runs.load() == 1);
  release.set();  // the old worker returns, sees its stop, cancels what its ring holds
  CHECK(eventually([&] { return m.stats().cancelled_at_stop == 2; }));
  CHECK(m.stop(2s));
  m.ensure_worker_started();  // the ring is free again: this worker takes it
  {
    worker_gate gate(m);
    (void)m.post(work_priority::normal, count_run{&runs});
    CHECK(sync_manager_access::ring_items_waiting(m) == 1);
    gate.release();
  }
  m.invoke(work_priority::background, [] {});
  CHECK(runs.load() == 2);
}

TEST_CASE("post: a thread that exits with its small items still queued loses none, and none runs twice") {
  sync::sync_manager m;
  const std::size_t items = 1000;
  std::vector<std::atomic<long>> runs(items);
  {
    worker_gate gate(m);
    std::thread poster([&] {
      for (std::size_t i = 0; i < items; ++i) m.post(work_priority::normal, count_run{&runs[i]});
    });
    poster.join();  // gone, its items queued
    CHECK(sync_manager_access::ring_items_waiting(m) == items);
    gate.release();
  }
  m.invoke(work_priority::background, [] {});
  check_each_ran_once(runs);
}

TEST_CASE("steady state: small items allocate no queue node") {
  sync::sync_manager m;
  std::atomic<long> runs{0};
  m.invoke(work_priority::background, [] {});
  const std::uint64_t made = sync_manager_access::node_allocations(m);
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 64; ++i) m.post(work_priority::normal, count_run{&runs});
    m.invoke(work_priority::background, [] {});
  }
  CHECK(runs.load() == 200 * 64);
  CHECK_MESSAGE(sync_manager_access::node_allocations(m) == made, "small items took queue nodes");
}

TEST_CASE("wake-up: a small or large item posted while the worker is held between its last look and its park runs") {
  // The window the park protocol closes (worker_state.hpp, fence pair W): the worker has
  // announced its park and looked for work a last time, finding none, and has not yet called
  // the futex wait. A poster that publishes now must see the announcement and wake it, or the
  // item waits for a wake-up that never comes.
  // The round whose park the hook holds next (-1: none), the round it holds now, and the
  // last round the test has let go. Atomics, not events: a round's release and the next
  // round's arming follow each other at once, and the hook spins (yielding) until let go.
  struct hold {
    std::atomic<int> armed{-1};
    std::atomic<int> held{-1};
    std::atomic<int> released{-1};
  } h;
  sync::sync_manager m;
  sync_manager_access::before_park(
      m,
      [](void* arg) {
        hold& held = *static_cast<hold*>(arg);
        const int round = held.armed.exchange(-1);
        if (round < 0) return;
        held.held.store(round);
        while (held.released.load() < round) sched_yield();
      },
      &h);  // before the worker starts: its start publishes the hook
  std::atomic<long> runs{0};
  const int rounds = 20;
  h.armed.store(0);
  m.ensure_worker_started();  // then idle: it parks, held
  for (int round = 0; round < rounds; ++round) {
    REQUIRE_MESSAGE(eventually([&] { return h.held.load() == round; }), "round " << round << ": never held");
    if (round % 2 == 0) {
      m.post(work_priority::normal, count_run{&runs});  // the ring
    } else {
      m.post(work_priority::normal, [&runs, pad = std::array<std::uint64_t, 5>{}] {  // a node
        (void)pad;
        runs.fetch_add(1);
      });
    }
    // The park after this item is held too; armed before the release, so that it cannot come
    // first.
    if (round + 1 < rounds) h.armed.store(round + 1);
    h.released.store(round);
    // Polled, not asked by an invoke: a post of ours would wake the worker itself.
    CHECK_MESSAGE(eventually([&] { return runs.load() == round + 1; }),
                  "round " << round << ": the item posted at the park never ran (a lost wake-up)");
  }
  h.released.store(rounds);  // a round still armed after a failure: let it go before the stop
}

TEST_CASE("idle: a worker with nothing to do parks (seen sleeping in /proc) and stays parked") {
  sync::sync_manager m;
  // Read on the worker, inside an item: the worker's next park comes after it and counts.
  const std::uint64_t before = m.invoke(work_priority::normal, [&m] { return sync_manager_access::parks(m); });
  const pid_t tid = sync_manager_access::worker(m).tid();
  // The event the code signals: the worker counts a park just before its futex wait.
  REQUIRE(eventually([&] { return sync_manager_access::parks(m) > before; }));
  const std::uint64_t parked = sync_manager_access::parks(m);
  // Counted before the system call: the thread may still be 'R' for an instant.
  CHECK_MESSAGE(eventually([&] { return palrt::testing::thread_state(tid) == 'S'; }),
                "the idle worker never slept; its state: " << palrt::testing::thread_state(tid));
  // Still the same park: it did not wake up and spin again meanwhile.
  CHECK(sync_manager_access::parks(m) == parked);
  // And it wakes for the next item.
  CHECK(m.invoke(work_priority::normal, [] { return 3; }) == 3);
}

TEST_CASE("idle: an invoke caller whose item waits behind a long one parks too (seen sleeping in /proc)") {
  sync::sync_manager m;
  worker_gate gate(m);
  std::atomic<pid_t> caller_tid{0};
  int result = 0;
  const std::uint64_t waiting = sync_manager_access::items_waiting(m);
  std::thread caller([&] {
    caller_tid = static_cast<pid_t>(::gettid());
    result = m.invoke(work_priority::normal, [] { return 9; });
  });
  REQUIRE(eventually([&] { return sync_manager_access::items_waiting(m) == waiting + 1; }));  // it waits
  // Its spin is bounded (max_spin): then it sleeps on its futex.
  CHECK_MESSAGE(eventually([&] { return palrt::testing::thread_state(caller_tid.load()) == 'S'; }),
                "the waiting caller never slept; its state: " << palrt::testing::thread_state(caller_tid.load()));
  gate.release();
  caller.join();
  CHECK(result == 9);
}

// --- Processes -------------------------------------------------------------------------------

TEST_CASE("process handle: signalled at exit with the exit code; a killed child reports its signal") {
  sync::sync_manager m;
  auto exits3 = m.open_process(spawn_shell("exit 3"));
  auto killed = m.open_process(spawn_shell("kill -KILL $$"));
  REQUIRE(sync::wait_one(exits3, 10s).status == wait_status::signalled);
  REQUIRE(sync::wait_one(killed, 10s).status == wait_status::signalled);
  CHECK(exits3.has_exited());
  CHECK(exits3.exit_status().code == 3);
  CHECK(exits3.exit_status().signal == 0);
  CHECK(killed.exit_status().signal == SIGKILL);
  // palrt reaped them: nothing is left for waitpid.
  CHECK(::waitpid(exits3.pid(), nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("process handle: exit status while running is an error; the handle survives until exit") {
  sync::sync_manager m;
  int release = -1;
  const pid_t pid = spawn_shell_held("exit 7", &release);
  auto child = m.open_process(pid);
  CHECK(child.pid() == pid);
  CHECK_FALSE(child.has_exited());
  std::string message;
  CHECK(error_of([&] { child.exit_status(); }, &message) == EBUSY);
  CHECK(message.find("still running") != std::string::npos);
  CHECK(sync::wait_one(child, 0ns).status == wait_status::timed_out);
  ::close(release);
  REQUIRE(sync::wait_one(child, 10s).status == wait_status::signalled);
  CHECK(child.exit_status().code == 7);
}

TEST_CASE("process handles: many children at once, each with its own status, waited on together") {
  sync::sync_manager m;
  const int children = 48;
  std::vector<sync::process_handle> handles;
  for (int i = 0; i < children; ++i) handles.push_back(m.open_process(spawn_shell("exit " + std::to_string(i))));
  std::vector<sync::handle> all(handles.begin(), handles.end());
  REQUIRE(sync::wait_all(all, 30s).status == wait_status::signalled);
  int wrong = 0;
  for (int i = 0; i < children; ++i) wrong += handles[static_cast<std::size_t>(i)].exit_status().code != i;
  CHECK_MESSAGE(wrong == 0, wrong << " children reported another exit code");
  // Also while the worker is busy with a stream of work: exits are still noticed.
  auto late = m.open_process(spawn_shell("exit 9"));
  std::atomic<bool> stop{false};
  std::thread poster([&] {
    while (!stop.load()) m.invoke(work_priority::normal, [] {});
  });
  CHECK(sync::wait_one(late, 10s).status == wait_status::signalled);
  stop = true;
  poster.join();
  CHECK(late.exit_status().code == 9);
}

TEST_CASE("process handle: a pid already reaped is an error that says so") {
  sync::sync_manager m;
  const pid_t pid = spawn_shell("exit 0");
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  std::string message;
  CHECK(error_of([&] { (void)m.open_process(pid); }, &message) == ESRCH);
  CHECK(message.find("reaped") != std::string::npos);
  CHECK(error_of([&] { (void)m.open_process(0); }) == EINVAL);
  CHECK(error_of([&] { (void)m.open_process(-5); }) == EINVAL);
  // Nothing else disturbed: the manager still works.
  CHECK(m.invoke(work_priority::normal, [] { return 1; }) == 1);
}

TEST_CASE("process handle: a process that is not our child is signalled at exit, its status unavailable") {
  sync::sync_manager m;
  // A grandchild, orphaned by its parent's exit: alive, not our child. It exits when its
  // stdin (a pipe we hold) closes.
  int to_grandchild[2], pid_pipe[2];
  REQUIRE(::pipe(to_grandchild) == 0);
  REQUIRE(::pipe(pid_pipe) == 0);
  const pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    // Async-signal-safe calls only: the test process has threads.
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::close(to_grandchild[1]);
      char c;
      while (::read(to_grandchild[0], &c, 1) > 0) {
      }
      ::_exit(5);
    }
    [[maybe_unused]] ssize_t n = ::write(pid_pipe[1], &grandchild, sizeof grandchild);
    ::_exit(0);
  }
  ::close(to_grandchild[0]);
  ::close(pid_pipe[1]);
  pid_t grandchild = -1;
  REQUIRE(::read(pid_pipe[0], &grandchild, sizeof grandchild) == static_cast<ssize_t>(sizeof grandchild));
  ::close(pid_pipe[0]);
  int status = 0;
  REQUIRE(::waitpid(middle, &status, 0) == middle);
  REQUIRE(grandchild > 0);
  auto other = m.open_process(grandchild);
  ::close(to_grandchild[1]);
  REQUIRE(sync::wait_one(other, 10s).status == wait_status::signalled);
  std::string message;
  CHECK(error_of([&] { other.exit_status(); }, &message) == ECHILD);
  CHECK(message.find("unavailable") != std::string::npos);
  CHECK(message.find("not a child") != std::string::npos);
}

TEST_CASE("process handles: every handle to one child sees its exit status, from one manager or two") {
  sync::sync_manager m, other;
  int release = -1;
  const pid_t pid = spawn_shell_held("exit 7", &release);
  std::vector<sync::process_handle> handles{m.open_process(pid), m.open_process(pid), other.open_process(pid)};
  ::close(release);
  for (std::size_t i = 0; i < handles.size(); ++i) {
    CAPTURE(i);
    REQUIRE(sync::wait_one(handles[i], 10s).status == wait_status::signalled);
    std::string message;
    int code = -1;
    CHECK(error_of([&] { code = handles[i].exit_status().code; }, &message) == 0);
    CHECK_MESSAGE(code == 7, message);
  }
  // Reaped once, by palrt: nothing is left for waitpid.
  CHECK(::waitpid(pid, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  // A later child gets a handle of its own, with its own status.
  const pid_t next = spawn_shell("exit 4");
  auto later = m.open_process(next);
  REQUIRE(sync::wait_one(later, 10s).status == wait_status::signalled);
  CHECK(later.exit_status().code == 4);
}

// --- Cancellation (sync_manager.hpp, "Cancellation") --------------------------------------

namespace {

// invoke() on a thread with a cancellation request (or a Boost interruption) pending when it
// begins: it must return the function's result, and the request act right after.
template <class Driver>
void check_invoke_runs_its_course(Driver with_request_pending) {
  {
    sync::sync_manager m;  // this invoke starts the worker (the lazy start)
    int got = 0;
    const auto o = with_request_pending([&] { got = m.invoke(work_priority::normal, [] { return 42; }); }, {}, {});
    CHECK_MESSAGE(o.returned, "invoke() (starting the worker) was unwound: it acted as a cancellation point");
    CHECK(o.acted_after);
    CHECK(got == 42);
  }
  // A function that keeps the caller waiting past its spin, parked in the kernel, until the
  // test lets it return.
  sync::sync_manager m;
  m.ensure_worker_started();
  event_handle may_return(event_reset::manual);
  int got = 0;
  const auto o = with_request_pending(
      [&] {
        got = m.invoke(work_priority::normal, [&] {
          (void)sync::wait_one(may_return);
          return 7;
        });
      },
      {}, [&] { may_return.set(); });
  CHECK_MESSAGE(o.returned, "invoke() was unwound while its function ran");
  CHECK(o.acted_after);
  CHECK(got == 7);
}

}  // namespace

TEST_CASE("cancellation: invoke() is not a cancellation point; a pending pthread_cancel acts after it returned") {
  check_invoke_runs_its_course(palrt::testing::call_with_cancel_pending);
}

TEST_CASE("cancellation: invoke() is not a Boost interruption point; a pending interrupt() acts after it returned") {
  check_invoke_runs_its_course(palrt::testing::call_with_interrupt_pending);
}

// SPDX-License-Identifier: MIT
// The finalizer thread with the embedded collector: the order of short weak, finalizer and
// long weak; resurrection and re-registration; wait_for_pending_finalizers() and its race;
// contained exceptions; bounded shutdown with a finalizer that blocks, and who runs what it
// leaves queued; waits with a cancellation request pending; the bootstrap's services end to
// end. No test orders events with a sleep.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "palrt/pal/wake_event.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/finalizer_thread_access.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "cancellation.hpp"
#include "scale.hpp"
#include "subprocess.hpp"
#include "thread_state.hpp"

using namespace palrt;
using namespace palrt::gc;
using namespace std::chrono_literals;

namespace {

std::atomic<int> finalized{0};
std::atomic<int> destroyed{0};

struct counted : finalizable {
  ~counted() override { destroyed.fetch_add(1); }
  void finalize() override { finalized.fetch_add(1); }
};

struct fixture {
  fixture() {
    finalized = 0;
    destroyed = 0;
    finalizer.start();
  }
  handle_table table;
  collector gc{table};
  finalizer_thread finalizer{gc};
};

void drop_and_finalize(fixture& f, ref<counted>& r) {
  r.reset();
  f.gc.collect();
  REQUIRE(f.finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
}

// Observes its own weak handles from inside finalize().
struct observed : finalizable {
  weak_handle<observed> short_weak, long_weak;
  bool short_cleared_in_finalizer = false, long_cleared_in_finalizer = true;
  static inline std::atomic<observed*> last{nullptr};
  void finalize() override {
    short_cleared_in_finalizer = short_weak.cleared();
    long_cleared_in_finalizer = long_weak.cleared();
    last = this;
    finalized.fetch_add(1);
  }
};

struct resurrecting : finalizable {
  static inline ref<finalizable> saved;
  static inline bool reregister = false;
  int times = 0;
  void finalize() override {
    ++times;
    finalized.fetch_add(1);
    saved = resurrect();
    if (reregister) reregister_for_finalize(*this);
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "finalizer: short weak handles are cleared before the finalizer runs, long ones after") {
  ref<observed> o = make_object<observed>(gc);
  o->short_weak = weak_handle<observed>(o, handle_kind::weak_short);
  o->long_weak = weak_handle<observed>(o, handle_kind::weak_long);
  weak_handle<observed> outside_long(o, handle_kind::weak_long);
  o.reset();
  const collection_report first = gc.collect();
  CHECK(first.queued_for_finalization == 1);
  CHECK(first.weak_short_cleared == 1);
  CHECK(first.weak_long_cleared == 0);
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  observed* seen = observed::last.load();
  REQUIRE(seen);
  CHECK(seen->short_cleared_in_finalizer);
  CHECK_FALSE(seen->long_cleared_in_finalizer);
  CHECK_FALSE(outside_long.cleared());
  CHECK_FALSE(outside_long.try_get());  // tracked through finalization, but not revived
  const collection_report second = gc.collect();
  CHECK(second.weak_long_cleared == 2);  // its own long one and outside_long
  CHECK(outside_long.cleared());
}

TEST_CASE_FIXTURE(fixture, "finalizer: a resurrected object keeps its long weak handles and is finalized once") {
  resurrecting::reregister = false;
  ref<resurrecting> r = make_object<resurrecting>(gc);
  weak_handle<resurrecting> long_weak(r, handle_kind::weak_long);
  weak_handle<resurrecting> short_weak(r, handle_kind::weak_short);
  r.reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalizer.counters().resurrected == 1);
  gc.collect();
  CHECK_FALSE(long_weak.cleared());
  ref<resurrecting> back = long_weak.try_get();
  REQUIRE(back);  // alive again, through the long weak handle
  CHECK(back->times == 1);
  CHECK(short_weak.cleared());  // short ones stay cleared
  back.reset();
  resurrecting::saved.reset();  // dead again: not finalized a second time
  gc.collect();
  CHECK(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalized == 1);
  CHECK(long_weak.cleared());
}

TEST_CASE_FIXTURE(fixture, "finalizer: reregister_for_finalize from finalize() makes it run again next time") {
  resurrecting::reregister = true;
  ref<resurrecting> r = make_object<resurrecting>(gc);
  r.reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  resurrecting::reregister = false;
  resurrecting::saved.reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalized == 2);
  resurrecting::saved.reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  gc.collect();
  CHECK(finalized == 2);
}

namespace {
// Resurrects itself, drops that reference (dead again: the count is zero and the object is
// back on the dead list), then resurrects itself once more.
struct resurrects_twice : finalizable {
  static inline ref<finalizable> kept;
  ~resurrects_twice() override { destroyed.fetch_add(1); }
  void finalize() override {
    ref<finalizable> first = resurrect();
    first.reset();
    kept = resurrect();
    finalized.fetch_add(1);
  }
};
}  // namespace

TEST_CASE_FIXTURE(
    fixture,
    "finalizer: a resurrect() after every reference from the first was dropped does not revive the dead object") {
  make_object<resurrects_twice>(gc).reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  REQUIRE(finalized == 1);
  // Zero is terminal: the object died again inside its finalize(), so the second resurrect()
  // has nothing to return (raising 0 to 1 would leave a live object on the dead list).
  CHECK_FALSE(resurrects_twice::kept);
  gc.collect();  // takes it up from the dead list: it is freed
  gc.collect();
  const bool freed_while_referenced = resurrects_twice::kept && destroyed == 1;
  CHECK_MESSAGE(!freed_while_referenced, "the object was freed while the second resurrect()'s reference points at it");
  if (freed_while_referenced) (void)resurrects_twice::kept.detach();  // would write freed memory
  resurrects_twice::kept.reset();
  gc.collect();
  CHECK(destroyed == 1);
  CHECK(gc.counters().objects_freed == gc.counters().objects_created);
}

TEST_CASE_FIXTURE(fixture, "finalizer: suppress_finalize skips the finalizer; the object is freed at once") {
  ref<counted> c = make_object<counted>(gc);
  suppress_finalize(*c);
  c.reset();
  const collection_report r = gc.collect();
  CHECK(r.queued_for_finalization == 0);
  CHECK(finalized == 0);
  CHECK(destroyed == 1);
}

TEST_CASE_FIXTURE(fixture, "finalizer: a finalized object is freed by the next collection") {
  ref<counted> c = make_object<counted>(gc);
  drop_and_finalize(*this, c);
  CHECK(finalized == 1);
  CHECK(destroyed == 0);
  gc.collect();
  CHECK(destroyed == 1);
  CHECK(finalizer.counters().longest_finalizer_ns > 0);
}

TEST_CASE_FIXTURE(fixture,
                  "finalizer: objects queued just before wait_for_pending_finalizers() are finalized when it returns") {
  // The finalizer is kept busy with earlier objects so that a drain is in progress when the
  // caller's objects are queued; waiting must not return on that earlier drain.
  const int rounds = static_cast<int>(100 * palrt::testing::scale());
  for (int round = 0; round < rounds; ++round) {
    std::vector<ref<counted>> batch;
    for (int i = 0; i < 64; ++i) batch.push_back(make_object<counted>(gc));
    batch.resize(32);
    gc.collect();  // 32 queued: a drain starts
    batch.clear();
    const int before = finalized.load();
    gc.collect();  // 32 more, queued just before the wait
    const auto result = finalizer.wait_for_pending_finalizers(10s);
    REQUIRE(result == pending_finalizers::finalized);
    REQUIRE_MESSAGE(finalized.load() == (round + 1) * 64, "round " << round << ": " << finalized.load() - before
                                                                   << " of the 32 queued just before were finalized");
  }
  CHECK(finalizer.counters().pending == 0);
}

TEST_CASE_FIXTURE(fixture, "finalizer: concurrent waiters each see their own objects finalized") {
  constexpr int threads = 3;
  const int rounds = static_cast<int>(50 * palrt::testing::scale());
  std::atomic<int> early{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < threads; ++t)
    waiters.emplace_back([&] {
      for (int r = 0; r < rounds; ++r) {
        std::atomic<int> mine{0};
        struct flagged : finalizable {
          explicit flagged(std::atomic<int>* c) : count(c) {}
          std::atomic<int>* count;
          void finalize() override { count->fetch_add(1); }
        };
        for (int i = 0; i < 8; ++i) make_object<flagged>(gc, &mine).reset();
        gc.collect();
        if (finalizer.wait_for_pending_finalizers(10s) != pending_finalizers::finalized || mine.load() != 8)
          early.fetch_add(1);
      }
    });
  for (auto& w : waiters) w.join();
  CHECK_MESSAGE(early.load() == 0, early.load() << " waits returned before their objects were finalized");
}

namespace {
finalizer_thread* running_finalizer = nullptr;
std::atomic<int> inside_result{-1};
struct waits_inside : finalizable {
  void finalize() override { inside_result = static_cast<int>(running_finalizer->wait_for_pending_finalizers(10s)); }
};
}  // namespace

TEST_CASE_FIXTURE(fixture, "finalizer: wait_for_pending_finalizers() on the finalizer thread returns at once") {
  running_finalizer = &finalizer;
  make_object<waits_inside>(gc).reset();
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(inside_result == static_cast<int>(pending_finalizers::finalized));
}

TEST_CASE("finalizer: waiting without a running finalizer thread says so instead of hanging") {
  handle_table table;
  collector gc(table);
  finalizer_thread f(gc);
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::not_running);
  f.start();
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::finalized);
  CHECK(f.stop());
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::not_running);
}

namespace {
// Records the thread each finalize() ran on.
struct where : finalizable {
  explicit where(std::thread::id* t) : ran_on(t) {}
  std::thread::id* ran_on;
  void finalize() override {
    *ran_on = std::this_thread::get_id();
    finalized.fetch_add(1);
  }
};
}  // namespace

TEST_CASE(
    "finalizer: once the finalizer thread is stopped, collect() runs the finalizers itself; nothing is left pending") {
  finalized = 0;
  handle_table table;
  collector gc(table);
  finalizer_thread f(gc);
  f.start();
  std::thread::id on_thread;
  make_object<where>(gc, &on_thread).reset();
  gc.collect();
  REQUIRE(f.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(on_thread != std::this_thread::get_id());  // on the finalizer thread
  CHECK(f.stop());

  constexpr int n = 100;
  std::vector<std::thread::id> ran_on(n);
  for (int i = 0; i < n; ++i) make_object<where>(gc, &ran_on[static_cast<std::size_t>(i)]).reset();
  gc.collect();  // no finalizer thread: this collect() runs them, on this thread
  CHECK(finalized == 1 + n);
  CHECK(f.counters().pending == 0);
  CHECK(gc.counters().finalization_pending == 0);
  int here = 0;
  for (const auto& t : ran_on) here += t == std::this_thread::get_id();
  CHECK(here == n);
  CHECK(gc.counters().finalized_inline == n);
  gc.collect();  // finalized: freed by the next collection
  CHECK(gc.counters().objects_freed == 1 + n);

  // Started again, the thread runs them again.
  f.start();
  make_object<where>(gc, &on_thread).reset();
  gc.collect();
  REQUIRE(f.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(on_thread != std::this_thread::get_id());
}

namespace {
struct throwing : finalizable {
  explicit throwing(bool std_exception) : standard(std_exception) {}
  bool standard;
  void finalize() override {
    finalized.fetch_add(1);
    if (standard) throw std::runtime_error("finalizer failed on purpose");
    throw 42;
  }
};
}  // namespace

TEST_CASE("finalizer: a throwing finalizer is contained, counted and reported; the thread goes on") {
  finalized = 0;
  handle_table table;
  collector gc(table);
  std::atomic<int> handled{0};
  finalizer_thread f(gc,
                     finalizer_options{.batch = 4, .on_exception = [&](std::exception_ptr) { handled.fetch_add(1); }});
  f.start();
  for (int i = 0; i < 10; ++i) make_object<throwing>(gc, i % 2 == 0).reset();
  for (int i = 0; i < 10; ++i) make_object<counted>(gc).reset();
  gc.collect();
  REQUIRE(f.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  const finalizer_counters c = f.counters();
  CHECK(c.exceptions == 10);
  CHECK(handled == 10);
  CHECK(c.finalized == 20);
  CHECK(finalized == 20);  // the ones after the throwing ones ran too
  CHECK((c.last_exception == "finalizer failed on purpose" ||
         c.last_exception == "an exception not derived from std::exception"));
  gc.collect();  // thrown or not, they are finalized: freed now
  CHECK(gc.counters().objects_freed == 20);
}

namespace {
collector* finalizer_collects = nullptr;
std::atomic<int> created_in_finalizer{0};
struct spawns : finalizable {
  explicit spawns(int depth) : depth(depth) {}
  int depth;
  void finalize() override {
    finalized.fetch_add(1);
    // A finalizer may allocate and collect: the next generation is finalized in turn.
    if (depth > 0) {
      make_object<spawns>(*finalizer_collects, depth - 1).reset();
      created_in_finalizer.fetch_add(1);
      finalizer_collects->collect();
    }
  }
};
}  // namespace

TEST_CASE_FIXTURE(fixture, "finalizer: a finalizer may create objects and collect on the finalizer thread") {
  finalizer_collects = &gc;
  created_in_finalizer = 0;
  make_object<spawns>(gc, 5).reset();
  gc.collect();
  // Each generation is queued by a collect() on the finalizer thread; wait until the last ran.
  for (int i = 0; i < 100 && finalized.load() < 6; ++i)
    REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  // The count reaches 6 inside the last finalize(), before the thread hands that object back
  // to the collector: wait for its batch to complete too (it was queued before this call).
  REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalized == 6);
  CHECK(created_in_finalizer == 5);
  gc.collect();
  CHECK(gc.counters().objects_freed == 6);
}

namespace {
palrt::pal::wake_event* finalizer_entered = nullptr;
palrt::pal::wake_event* finalizer_may_return = nullptr;
// Set once the blocked finalizer is done with the test's events (release): the test's
// acquire of it orders the detached thread's last touch of them before the test's stack
// frame goes (seeing the thread gone in /proc is no ordering TSan can see).
std::atomic<bool> finalizer_done_with_events{false};
struct blocking : finalizable {
  void finalize() override {
    finalizer_entered->set();
    finalizer_may_return->wait();
    finalizer_done_with_events.store(true, std::memory_order_release);
  }
};
// A case's events for its blocking finalizer, and the counters reset: declare it first.
struct blocking_events {
  palrt::pal::wake_event entered, may_return;
  blocking_events() {
    finalized = 0;
    finalizer_done_with_events = false;
    finalizer_entered = &entered;
    finalizer_may_return = &may_return;
  }
};
}  // namespace

TEST_CASE("finalizer: a blocking finalizer cannot hang shutdown; what was left is reported") {
  finalized = 0;
  palrt::pal::wake_event entered, may_return;
  finalizer_entered = &entered;
  finalizer_may_return = &may_return;
  handle_table table;
  pid_t tid = 0;
  {
    collector gc(table);
    finalizer_thread f(gc, finalizer_options{.batch = 1});
    f.start();
    tid = palrt::gc::internal::finalizer_thread_access::thread(f).tid();
    make_object<blocking>(gc).reset();
    for (int i = 0; i < 5; ++i) make_object<counted>(gc).reset();
    gc.collect();
    REQUIRE(entered.wait_for(10s));
    CHECK(f.counters().running_finalizer_ns > 0);  // the stuck one is visible
    CHECK(f.wait_for_pending_finalizers(1ms) == pending_finalizers::timed_out);
    CHECK_FALSE(f.stop(50ms));              // missed its deadline: detached, shutdown goes on
    CHECK(f.counters().left_at_stop == 6);  // the blocked one and the five behind it
    CHECK(f.wait_for_pending_finalizers() == pending_finalizers::not_running);
    // The five stay queued; the collector's destructor frees them without their finalizers
    // (collector.hpp); the blocked object stays allocated (its finalizer still runs) and the
    // collector says so on stderr.
  }
  CHECK(finalized == 0);
  // Let the detached thread finish on its own, with the state it kept alive.
  may_return.set();
  CHECK(palrt::testing::eventually([] { return finalizer_done_with_events.load(std::memory_order_acquire); }));
  CHECK(palrt::testing::eventually([tid] { return !palrt::testing::thread_exists(tid); }));
}

namespace {
// Counts its own finalize() calls and where the last one ran; the record outlives the object.
struct tallied : finalizable {
  struct record {
    int runs = 0;
    std::thread::id ran_on;
    bool destroyed = false;
  };
  explicit tallied(record* r) : rec(r) {}
  ~tallied() override { rec->destroyed = true; }
  void finalize() override {
    ++rec->runs;
    rec->ran_on = std::this_thread::get_id();
    finalized.fetch_add(1);
  }
  record* rec;
};

struct tally {
  int lost = 0, twice = 0, elsewhere = 0, freed = 0;
};
tally count_runs(const std::vector<tallied::record>& records, std::thread::id expected_thread) {
  tally t;
  for (const auto& r : records) {
    t.lost += r.runs == 0;
    t.twice += r.runs > 1;
    t.elsewhere += r.runs == 1 && r.ran_on != expected_thread;
    t.freed += r.destroyed;
  }
  return t;
}

// The objects a test queues behind the blocking one.
constexpr int queued_behind = 100;

// Queues a blocking object and `records.size()` tallied ones behind it in one collect(), and
// returns once the finalizer thread is inside the blocking one.
void queue_behind_a_blocking_finalizer(collector& gc, std::vector<tallied::record>& records) {
  make_object<blocking>(gc).reset();
  for (auto& r : records) make_object<tallied>(gc, &r).reset();
  gc.collect();
  REQUIRE(finalizer_entered->wait_for(10s));
}
}  // namespace

TEST_CASE("finalizer: a stop that misses its deadline inside a slow finalizer leaves the rest queued; the next "
          "collect() runs them at once") {
  blocking_events ev;
  std::vector<tallied::record> records(queued_behind);  // first: the objects write theirs when freed
  handle_table table;
  collector gc(table);
  finalizer_thread f(gc);
  f.start();
  const pid_t tid = palrt::gc::internal::finalizer_thread_access::thread(f).tid();
  queue_behind_a_blocking_finalizer(gc, records);

  CHECK_FALSE(f.stop(1ms));  // inside the slow finalizer: missed its deadline, detached
  CHECK(f.counters().left_at_stop == queued_behind + 1);
  // The slow one still runs on the detached thread; the ones behind it are not held there.
  const collection_report r = gc.collect();
  CHECK(r.finalized_inline == queued_behind);
  tally t = count_runs(records, std::this_thread::get_id());
  CHECK_MESSAGE(t.lost == 0, t.lost << " of " << queued_behind << " queued finalizers did not run in collect()");
  CHECK_MESSAGE(t.twice == 0, t.twice << " finalizers ran twice");
  CHECK_MESSAGE(t.elsewhere == 0, t.elsewhere << " finalizers ran on another thread than collect()'s caller");
  CHECK(gc.counters().finalization_pending == 1);  // the slow one
  CHECK(f.wait_for_pending_finalizers() == pending_finalizers::not_running);

  // The slow one returns: the detached thread hands it back and ends, running nothing more.
  ev.may_return.set();
  CHECK(palrt::testing::eventually([] { return finalizer_done_with_events.load(std::memory_order_acquire); }));
  CHECK(palrt::testing::eventually([&gc] { return gc.counters().finalization_pending == 0; }));
  CHECK(palrt::testing::eventually([tid] { return !palrt::testing::thread_exists(tid); }));
  gc.collect();
  CHECK(gc.counters().objects_freed == queued_behind + 1);
  t = count_runs(records, std::this_thread::get_id());
  CHECK(t.twice == 0);
  CHECK(t.freed == queued_behind);
}

TEST_CASE(
    "finalizer: started again after a stop that missed its deadline, the new thread runs what the stuck one left") {
  blocking_events ev;
  std::vector<tallied::record> records(queued_behind);  // first: the objects write theirs when freed
  handle_table table;
  collector gc(table);
  finalizer_thread f(gc);
  f.start();
  const pid_t stuck = palrt::gc::internal::finalizer_thread_access::thread(f).tid();
  queue_behind_a_blocking_finalizer(gc, records);
  CHECK_FALSE(f.stop(1ms));
  f.start();  // a new launch, while the detached one still runs the slow finalizer
  // wait_for_pending_finalizers() would wait for the slow one too (it was queued before):
  // wait for the count of the others instead.
  CHECK(palrt::testing::eventually([&gc] { return gc.counters().finalization_pending == 1; }));
  int on_new_thread = 0;
  for (const auto& r : records) on_new_thread += r.runs == 1 && r.ran_on != std::this_thread::get_id();
  CHECK_MESSAGE(on_new_thread == queued_behind,
                on_new_thread << " of " << queued_behind << " ran once on the new thread");
  ev.may_return.set();
  CHECK(palrt::testing::eventually([] { return finalizer_done_with_events.load(std::memory_order_acquire); }));
  CHECK(palrt::testing::eventually([stuck] { return !palrt::testing::thread_exists(stuck); }));
  CHECK(f.stop());
  const tally t = count_runs(records, std::this_thread::get_id());
  CHECK(t.twice == 0);
}

TEST_CASE("finalizer: a runtime destroyed while a finalizer that missed the shutdown deadline still runs first runs "
          "every finalizer queued behind it") {
  blocking_events ev;
  std::vector<tallied::record> records(queued_behind);  // first: the objects write theirs when freed
  startup::options opts;
  opts.stop_timeout = 1ms;
  auto rt = startup::bootstrap(opts);
  const pid_t tid = palrt::gc::internal::finalizer_thread_access::thread(rt->services().finalizer()).tid();
  queue_behind_a_blocking_finalizer(rt->services().collector(), records);

  const startup::shutdown_report down = rt->shutdown();
  CHECK(down.not_joined == std::vector<std::string>{"finalizer"});
  rt.reset();  // while the slow finalizer still runs on the detached thread
  tally t = count_runs(records, std::this_thread::get_id());
  CHECK_MESSAGE(t.lost == 0, t.lost << " of " << queued_behind << " queued finalizers never ran");
  CHECK_MESSAGE(t.twice == 0, t.twice << " finalizers ran twice");
  CHECK_MESSAGE(t.elsewhere == 0,
                t.elsewhere << " finalizers ran on another thread than the one destroying the runtime");
  CHECK(t.freed == queued_behind);  // finalized, then freed with the collector

  ev.may_return.set();
  CHECK(palrt::testing::eventually([] { return finalizer_done_with_events.load(std::memory_order_acquire); }));
  CHECK(palrt::testing::eventually([tid] { return !palrt::testing::thread_exists(tid); }));
  t = count_runs(records, std::this_thread::get_id());
  CHECK(t.twice == 0);  // the detached thread ran nothing more
}

PALRT_FRESH_PROCESS(finalizer_blocked_for_good_at_exit) {
  // The blocking finalizer never returns: its events stay valid for the life of the process.
  finalizer_entered = new palrt::pal::wake_event;
  finalizer_may_return = new palrt::pal::wake_event;
  std::vector<tallied::record> records(queued_behind);  // first: the objects write theirs when freed
  startup::options opts;
  opts.stop_timeout = 1ms;
  auto rt = startup::bootstrap(opts);
  make_object<blocking>(rt->services().collector()).reset();
  for (auto& r : records) make_object<tallied>(rt->services().collector(), &r).reset();
  rt->services().collector().collect();
  if (!finalizer_entered->wait_for(10s)) return 3;
  const bool clean = rt->shutdown().clean();
  rt.reset();
  const tally t = count_runs(records, std::this_thread::get_id());
  std::printf("shutdown_clean=%d lost=%d twice=%d elsewhere=%d\n", clean, t.lost, t.twice, t.elsewhere);
  return 0;  // exits with the finalizer thread still blocked
}

TEST_CASE("finalizer: a finalizer blocked for good at exit does not hang the process; the ones queued behind it ran") {
  const auto c = palrt::testing::run_fresh("finalizer_blocked_for_good_at_exit");
  CHECK_FALSE(c.timed_out);
  CHECK(c.exit_code == 0);
  CHECK_MESSAGE(c.out.find("shutdown_clean=0 lost=0 twice=0 elsewhere=0") != std::string::npos, c.out << c.err);
}

namespace {
// wait_for_pending_finalizers() on a thread with a cancellation request (or a Boost
// interruption) pending when it begins, while a finalizer blocks: it must wait until the
// finalizers ran, return finalized, and the request act right after.
template <class Driver>
void check_wait_for_pending_finalizers_runs_its_course(Driver with_request_pending) {
  blocking_events ev;
  handle_table table;
  collector gc(table);
  finalizer_thread f(gc);
  f.start();
  make_object<blocking>(gc).reset();
  for (int i = 0; i < 10; ++i) make_object<counted>(gc).reset();
  gc.collect();
  REQUIRE(ev.entered.wait_for(10s));
  pending_finalizers result = pending_finalizers::timed_out;
  const palrt::testing::cancellation_outcome o =
      with_request_pending([&] { result = f.wait_for_pending_finalizers(); }, {}, [&] { ev.may_return.set(); });
  CHECK_MESSAGE(o.returned, "wait_for_pending_finalizers() was unwound: it acted as a cancellation point");
  CHECK(o.acted_after);
  CHECK(result == pending_finalizers::finalized);
  CHECK(finalized == 10);
  // The waiter left nothing behind: the next wait works as ever.
  make_object<counted>(gc).reset();
  gc.collect();
  CHECK(f.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalized == 11);
}
}  // namespace

TEST_CASE("cancellation: wait_for_pending_finalizers() is not a cancellation point; a pending pthread_cancel acts "
          "after it returned") {
  check_wait_for_pending_finalizers_runs_its_course(palrt::testing::call_with_cancel_pending);
}

TEST_CASE("cancellation: wait_for_pending_finalizers() is not a Boost interruption point; a pending interrupt() acts "
          "after it returned") {
  check_wait_for_pending_finalizers_runs_its_course(palrt::testing::call_with_interrupt_pending);
}

TEST_CASE("finalizer: the bootstrap's services collect and finalize end to end") {
  finalized = 0;
  auto rt = palrt::startup::bootstrap();
  auto& s = rt->services();
  ref<counted> c = make_object<counted>(s.collector());
  weak_handle<counted> w(c);
  c.reset();
  s.collector().collect();
  CHECK(w.cleared());
  REQUIRE(s.finalizer().wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  CHECK(finalized == 1);
  w.reset();
  CHECK(rt->shutdown().clean());
}

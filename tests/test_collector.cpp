// SPDX-License-Identifier: MIT
// The embedded collector: terminal zero, each handle kind's semantics through a collection,
// grace periods against readers, cascades, automatic collection, stress and misuse. The
// finalizer thread's own behaviour is in test_finalizer.cpp.
#include <doctest/doctest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <latch>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/pal/process_barrier.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/object.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "cancellation.hpp"
#include "scale.hpp"
#include "subprocess.hpp"

using namespace palrt;
using namespace palrt::gc;
using namespace std::chrono_literals;

namespace {

std::atomic<int> destroyed{0};

struct node : object {
  static constexpr std::uint64_t alive_magic = 0x600dc0de600dc0de;
  explicit node(int v = 0, ref<node> n = {}) : value(v), next(std::move(n)) {}
  ~node() override {
    magic = 0xdeaddeaddeaddead;
    destroyed.fetch_add(1);
  }
  std::uint64_t magic = alive_magic;
  int value;
  ref<node> next;
};

std::size_t handles_in_use(handle_table& t) {
  std::size_t n = 0;
  for (std::size_t k : t.counters().handles) n += k;
  return n;
}

struct fixture {
  fixture() { destroyed = 0; }
  handle_table table;
  collector gc{table};
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "collector: zero is terminal, a weak handle never revives a dead object") {
  ref<node> n = make_object<node>(gc, 7);
  weak_handle<node> w(n);
  {
    ref<node> again = w.try_get();
    REQUIRE(again);
    CHECK(again->value == 7);
  }
  ref<node> copy = n;
  n.reset();
  CHECK(w.try_get());  // one reference left
  copy.reset();
  CHECK_FALSE(w.try_get());  // dead before any collection: not revived
  CHECK_FALSE(w.cleared());  // ...and not cleared until a collection sees it
  CHECK(destroyed == 0);     // nor freed
  const collection_report r = gc.collect();
  CHECK(r.found_dead == 1);
  CHECK(r.weak_short_cleared == 1);
  CHECK(w.cleared());
  CHECK(r.freed == 1);  // no reader was in a section: freed in the same collection
  CHECK(destroyed == 1);
}

TEST_CASE_FIXTURE(fixture, "collector: a strong handle keeps its target alive; typed handles release their slots") {
  ref<node> n = make_object<node>(gc, 1);
  weak_handle<node> w(n, handle_kind::weak_long);
  {
    strong_handle<node> root(n);
    n.reset();
    gc.collect();
    CHECK(destroyed == 0);
    CHECK(root.get()->value == 1);
    CHECK(w.try_get());
    CHECK_THROWS_AS(weak_handle<node>(root.lock(), handle_kind::strong), std::invalid_argument);
  }
  gc.collect();
  CHECK(destroyed == 1);
  CHECK(w.cleared());
  w.reset();
  CHECK(handles_in_use(table) == 0);
}

TEST_CASE_FIXTURE(fixture, "collector: a dependent handle keeps its secondary alive only while its primary lives") {
  ref<node> primary = make_object<node>(gc, 1);
  ref<node> secondary = make_object<node>(gc, 2);
  weak_handle<node> watch_secondary(secondary);
  dependent_handle<node, node> d(primary, secondary);
  secondary.reset();
  gc.collect();
  REQUIRE(d.try_get_secondary());  // held by the handle while the primary lives
  CHECK(d.try_get_secondary()->value == 2);
  CHECK(destroyed == 0);

  primary.reset();
  const collection_report r = gc.collect();
  CHECK(r.dependent_cleared == 1);
  CHECK_FALSE(d.try_get_primary());
  CHECK_FALSE(d.try_get_secondary());
  CHECK(watch_secondary.cleared());  // collected in a further round of the same collect()
  CHECK(r.rounds >= 2);
  CHECK(destroyed == 2);
  d.reset();                          // the sweep dropped the secondary: the owner must not drop it again
  CHECK(handles_in_use(table) == 1);  // watch_secondary
}

TEST_CASE_FIXTURE(fixture, "collector: a dependent handle reset by its owner drops its secondary once") {
  ref<node> primary = make_object<node>(gc, 1);
  dependent_handle<node, node> d(primary, make_object<node>(gc, 2));
  d.reset();
  gc.collect();
  CHECK(destroyed == 1);  // the secondary
  primary.reset();
  gc.collect();
  CHECK(destroyed == 2);
}

TEST_CASE_FIXTURE(fixture, "collector: one collect() frees a chain that destructors release one by one") {
  ref<node> head;
  for (int i = 0; i < 50; ++i) head = make_object<node>(gc, i, std::move(head));
  head.reset();
  const collection_report r = gc.collect();
  CHECK(destroyed == 50);
  CHECK(r.freed == 50);
  CHECK(gc.counters().objects_created == gc.counters().objects_freed);
}

TEST_CASE_FIXTURE(fixture, "collector: memory a reader may still use is freed only after its read section ends") {
  ref<node> n = make_object<node>(gc, 5);
  weak_handle<node> w(n);
  std::latch loaded(1), collected(1);
  std::promise<std::uint64_t> seen;
  std::thread reader([&] {
    read_section section;
    auto* raw = static_cast<node*>(handle_table::target(w.raw()));  // no reference taken
    loaded.count_down();
    collected.wait();
    seen.set_value(raw->magic);  // still valid memory: the grace period has not passed
  });
  loaded.wait();
  n.reset();
  const collection_report r = gc.collect();
  CHECK(r.retired == 1);
  CHECK(r.freed == 0);
  CHECK(r.awaiting_grace_period == 1);
  CHECK(w.cleared());
  CHECK(destroyed == 0);
  collected.count_down();
  CHECK(seen.get_future().get() == node::alive_magic);
  reader.join();
  CHECK(gc.synchronize());
  CHECK(destroyed == 1);
}

TEST_CASE_FIXTURE(fixture, "collector: read sections nest, and an idle thread does not hold up a grace period") {
  std::latch entered(1), release(1);
  std::thread idle([&] {
    { read_section s; }  // registered, then out of any section
    entered.count_down();
    release.wait();
  });
  entered.wait();
  {
    read_section outer;
    { read_section inner; }  // ending the inner section does not end the outer one
    ref<node> n = make_object<node>(gc);
    n.reset();
    gc.collect();
    CHECK(destroyed == 0);  // this thread is still in `outer`
  }
  CHECK(gc.synchronize());  // the idle thread, outside any section, does not hold it up
  CHECK(destroyed == 1);
  release.count_down();
  idle.join();
}

// A thread's sections may close in any order (read_section.hpp): what protects a reader is
// that some section of its thread is open, not which one was opened first.
TEST_CASE_FIXTURE(fixture, "collector: read sections closed out of order keep protecting the one still open") {
  ref<node> n = make_object<node>(gc, 3);
  weak_handle<node> w(n);
  std::optional<read_section> outer(std::in_place), inner(std::in_place);
  auto* raw = static_cast<node*>(handle_table::target(w.raw()));  // loaded under both
  outer.reset();  // the first one opened closes first: `inner` still reads `raw`
  n.reset();
  const collection_report r = gc.collect();
  CHECK(r.retired == 1);
  CHECK(r.freed == 0);
  CHECK(destroyed == 0);
  CHECK(raw->magic == node::alive_magic);
  inner.reset();  // the thread's last section
  CHECK(gc.synchronize());
  CHECK(destroyed == 1);
}

namespace {

// The smallest generator: the caller resumes it; it suspends at each co_yield.
struct magic_reader {
  struct promise_type {
    std::uint64_t value = 0;
    magic_reader get_return_object() { return magic_reader{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(std::uint64_t v) noexcept {
      value = v;
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() { std::terminate(); }
  };
  explicit magic_reader(std::coroutine_handle<promise_type> h) : handle(h) {}
  magic_reader(const magic_reader&) = delete;
  ~magic_reader() { handle.destroy(); }
  std::uint64_t next() {
    handle.resume();
    return handle.promise().value;
  }
  std::coroutine_handle<promise_type> handle;
};

// Opens a section, loads the target and yields inside it, then reads the target again.
magic_reader read_twice(weak_handle<node>* w) {
  read_section section;
  auto* raw = static_cast<node*>(handle_table::target(w->raw()));
  co_yield raw->magic;
  co_yield raw->magic;  // after the caller's section (opened before ours) closed
}

}  // namespace

TEST_CASE_FIXTURE(
    fixture, "collector: a coroutine suspended inside a read section stays protected after its caller's section ends") {
  ref<node> n = make_object<node>(gc, 4);
  weak_handle<node> w(n);
  magic_reader reader = read_twice(&w);
  {
    read_section caller;                        // opened first...
    CHECK(reader.next() == node::alive_magic);  // ...the coroutine's opens inside it and suspends
  }                                             // ...and the caller's closes first
  n.reset();
  const collection_report r = gc.collect();
  CHECK(r.freed == 0);
  CHECK(destroyed == 0);
  CHECK(reader.next() == node::alive_magic);  // resumed: still valid memory
  reader.next();                              // runs to its end: its section closes
  CHECK(gc.synchronize());
  CHECK(destroyed == 1);
}

TEST_CASE_FIXTURE(
    fixture, "collector: 65535 open sections of one thread, closed in any order; one more throws and changes nothing") {
  constexpr std::size_t most = 65535;
  std::vector<std::optional<read_section>> open(most + 1);
  for (std::size_t i = 0; i < most; ++i) open[i].emplace();
  CHECK_THROWS_AS(open[most].emplace(), std::length_error);
  ref<node> n = make_object<node>(gc);
  n.reset();
  gc.collect();
  // Close all but one, in an order that is neither the opening one nor its reverse.
  std::size_t closed = 0;
  for (std::size_t stride : {7u, 3u, 1u})
    for (std::size_t i = 0; i < most - 1; i += stride)
      if (open[i]) {
        open[i].reset();
        ++closed;
      }
  REQUIRE(closed == most - 1);
  CHECK_FALSE(gc.synchronize(0ms));  // the last one open still holds the grace period
  CHECK(destroyed == 0);
  open[most - 1].reset();
  CHECK(gc.synchronize());
  CHECK(destroyed == 1);
}

// Every reclaimer (the collector's, the identity cache's) scans the readers first and walks
// its retired list after, under a lock other retirements may have taken in between. The scan
// must not pass a batch retired after it, even when no reader was in a section: a reader may
// have opened its section after the scan and reached the batch before it was unlinked.
TEST_CASE("grace period: a batch retired after a scan never passes it, even when the scan saw no reader") {
  namespace gp = palrt::gc::internal;
  const std::uint64_t retired_before = gp::retire_epoch();
  const std::uint64_t scan = gp::oldest_reader_epoch();  // no thread is in a section
  CHECK(scan > retired_before);                          // what was retired before the scan passes
  read_section r;  // a reader that came after the scan, and may load what is retired next
  const std::uint64_t retired_after = gp::retire_epoch();
  INFO("scan " << scan << ", batch retired after it tagged " << retired_after);
  CHECK_FALSE(scan > retired_after);
}

TEST_CASE("collector: collects on its own every N allocations when asked") {
  destroyed = 0;
  handle_table table;
  collector gc(table, collector_options{.collect_every = 16});
  for (int i = 0; i < 64; ++i) make_object<node>(gc, i).reset();
  CHECK(gc.counters().collections >= 3);
  CHECK(destroyed >= 48);
}

TEST_CASE(
    "collector: destroyed with no finalizer, it frees finalizable objects that its own last collections leave dead") {
  // A finalizable kept alive only by an object that dies with the collector's last
  // collections is queued for a finalizer that no longer runs: it must be freed all the same.
  struct holder : object {
    ref<object> held;
  };
  struct finalizable_node : finalizable {
    ~finalizable_node() override { destroyed.fetch_add(1); }
    void finalize() override {}
  };
  destroyed = 0;
  {
    handle_table table;
    collector gc(table);
    for (int chain = 0; chain < 3; ++chain) {
      ref<holder> h = make_object<holder>(gc);
      h->held = make_object<finalizable_node>(gc);
      ref<holder> outer = make_object<holder>(gc);
      outer->held = h;  // two levels: each round leaves the next one dead
    }
    CHECK(destroyed == 0);
  }
  CHECK(destroyed == 3);
}

namespace {
std::atomic<int> finalizers_ran{0};
struct counted_finalizable : finalizable {
  explicit counted_finalizable(bool throws = false) : throws_in_finalize(throws) {}
  ~counted_finalizable() override { destroyed.fetch_add(1); }
  void finalize() override {
    finalizers_ran.fetch_add(1);
    if (throws_in_finalize) throw std::runtime_error("a finalizer run by collect() failed on purpose");
  }
  bool throws_in_finalize;
};
}  // namespace

TEST_CASE_FIXTURE(
    fixture, "collector: without a finalizer thread, collect() runs the finalizers itself; nothing is held pending") {
  // A standalone collector (no finalizer thread ever attached) must not hold dead
  // finalizable objects, their handles and what they keep, in a queue nobody drains.
  finalizers_ran = 0;
  constexpr int n = 200;
  std::vector<weak_handle<counted_finalizable>> long_weak;
  for (int i = 0; i < n; ++i) {
    ref<counted_finalizable> o = make_object<counted_finalizable>(gc, i == 7);  // one of them throws
    long_weak.emplace_back(o, handle_kind::weak_long);
  }
  const collection_report first = gc.collect();  // contains the exception: does not throw
  CHECK(first.queued_for_finalization == n);
  CHECK(finalizers_ran == n);
  CHECK(gc.counters().finalization_pending == 0);
  CHECK(first.finalized_inline == n);
  CHECK(gc.counters().finalized_inline == n);
  CHECK(gc.counters().inline_finalizer_exceptions == 1);  // contained and counted
  const collection_report second = gc.collect();          // finalized: freed by the next collection
  CHECK(second.weak_long_cleared == n);
  CHECK(destroyed == n);
  int cleared = 0;
  for (const auto& w : long_weak) cleared += w.cleared();
  CHECK(cleared == n);
}

TEST_CASE_FIXTURE(fixture, "collector: a constructor that throws registers nothing") {
  struct throws : object {
    throws() { throw std::runtime_error("no"); }
  };
  CHECK_THROWS_AS(make_object<throws>(gc), std::runtime_error);
  CHECK(gc.counters().objects_created == 0);
  ref<node> fine = make_object<node>(gc);  // the next one is fine
  CHECK(gc.counters().objects_created == 1);
}

TEST_CASE("collector: mutators, readers and collections at once lose nothing and free nothing early") {
  // Threads create objects, keep weak handles to some, read them with try_get() and drop
  // them, while another thread collects without pause. Every object seen alive must carry its
  // magic (a freed one is poisoned, and ASan would report the read); every object is freed by
  // the end; every handle is released.
  destroyed = 0;
  constexpr int threads = 3;
  const int rounds = static_cast<int>(300 * palrt::testing::scale());
  handle_table table;
  std::atomic<long> bad{0}, revived{0}, created{0};
  {
    collector gc(table);
    std::atomic<bool> done{false};
    // Two collecting threads: collections also race each other.
    std::thread collecting([&] {
      while (!done.load()) gc.collect();
    });
    std::thread collecting_too([&] {
      while (!done.load()) gc.collect();
    });
    std::vector<std::thread> mutators;
    for (int t = 0; t < threads; ++t)
      mutators.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          std::vector<ref<node>> live;
          std::vector<weak_handle<node>> weak;
          for (int i = 0; i < 16; ++i) {
            live.push_back(make_object<node>(gc, t * 1000 + i));
            weak.emplace_back(live.back(), (i % 2) ? handle_kind::weak_long : handle_kind::weak_short);
            created.fetch_add(1);
          }
          for (int i = 0; i < 16; i += 2) live[i].reset();  // half die now
          for (int i = 0; i < 16; ++i) {
            ref<node> got = weak[i].try_get();
            if (got && got->magic != node::alive_magic) bad.fetch_add(1);
            if (got && i % 2 == 0) revived.fetch_add(1);  // dropped ones must stay dead
          }
        }
      });
    for (auto& m : mutators) m.join();
    done = true;
    collecting.join();
    collecting_too.join();
    gc.collect();
    CHECK(gc.synchronize());
    INFO("created " << created.load() << ", destroyed " << destroyed.load());
    CHECK(bad.load() == 0);
    CHECK(revived.load() == 0);
    CHECK(destroyed.load() == created.load());
    CHECK(gc.counters().objects_freed == static_cast<std::uint64_t>(created.load()));
  }
  CHECK(handles_in_use(table) == 0);
}

TEST_CASE("collector: a second collector on one handle table is refused") {
  // Two collectors sweeping one table would race: each clears the handles of the objects it
  // finds dead while the other walks the same blocks.
  handle_table table;
  {
    collector first(table);
    CHECK_THROWS_AS(collector{table}, std::logic_error);
    ref<node> n = make_object<node>(first);  // the first one is unaffected
    weak_handle<node> w(n);
    n.reset();
    first.collect();
    CHECK(w.cleared());
  }
  collector next(table);  // once the first is gone, the table takes another
  CHECK(next.collect().found_dead == 0);
}

namespace {
collector* collecting_from_destructor = nullptr;
std::atomic<int> nested_found{-1};
struct collects_in_destructor : object {
  ~collects_in_destructor() override {
    nested_found = static_cast<int>(collecting_from_destructor->collect().found_dead);
  }
};
}  // namespace

TEST_CASE_FIXTURE(fixture, "collector: collect() from a destructor that a collection runs returns at once") {
  collecting_from_destructor = &gc;
  make_object<collects_in_destructor>(gc).reset();
  const collection_report r = gc.collect();  // would deadlock if the nested call waited
  CHECK(r.freed == 1);
  CHECK(nested_found == 0);
}

PALRT_FRESH_PROCESS(object_outside_make_object) {
  struct loose : object {};
  loose stack_object;  // aborts: no collector could ever free it
  return 0;
}

PALRT_FRESH_PROCESS(collector_destroyed_with_live_objects) {
  handle_table table;
  auto gc = std::make_unique<collector>(table);
  ref<node> kept = make_object<node>(*gc, 1);
  gc.reset();    // says so on stderr, keeps its state
  kept.reset();  // still safe: pushes onto the kept state, nothing is freed
  std::printf("survived\n");
  return 0;
}

// A thread leaves a read section without unwinding (here: a section that is never
// destroyed, as after a longjmp out of it) and exits; a second thread then reuses its record
// (the only one in this fresh process).
PALRT_FRESH_PROCESS(thread_exits_inside_read_section) {
  handle_table table;
  collector gc(table);
  std::thread([] {
    alignas(read_section) unsigned char storage[sizeof(read_section)];
    new (storage) read_section;  // opened, never closed
  }).join();
  ref<node> n = make_object<node>(gc, 1);
  weak_handle<node> w(n);
  std::latch inside(1), may_leave(1);
  std::thread reader([&] {
    read_section section;  // this thread's own section counts, and only it
    inside.count_down();
    may_leave.wait();
  });
  inside.wait();
  n.reset();
  const collection_report r = gc.collect();
  may_leave.count_down();
  reader.join();
  // Bounded: a record left in a section would hold every grace period from now on.
  const bool freed = gc.synchronize(2s);
  std::printf("held while inside: %d, freed after: %d\n", r.freed == 0 && w.cleared(), freed);
  return 0;
}

TEST_CASE(
    "collector: a thread that exits inside a read section neither holds up grace periods nor leaves its record open") {
  auto c = palrt::testing::run_fresh("thread_exits_inside_read_section");
  CHECK(c.exit_code == 0);
  CHECK(c.out == "held while inside: 1, freed after: 1\n");
  CHECK(c.err.find("palrt: a thread exited inside a read section it never closed") != std::string::npos);
}

// A plugin host: no bootstrap(), a collector made when the host's threads already run.
PALRT_FRESH_PROCESS(collector_without_bootstrap) {
  if (std::getenv("PALRT_TEST_INITIALIZE_FIRST")) palrt::pal::initialize_process_barrier();
  handle_table table;
  collector gc(table);
  make_object<node>(gc).reset();
  const bool before = palrt::pal::process_barrier_state_if_initialized() != nullptr;
  gc.collect();  // frees it: its grace period runs the process barrier
  const palrt::pal::process_barrier_state* st = palrt::pal::process_barrier_state_if_initialized();
  std::printf("before: %d, after: %d, on first use: %d\n", before, st != nullptr, st && st->initialized_on_first_use);
  return 0;
}

TEST_CASE(
    "collector: without bootstrap(), the first collect() initialises the process barrier, and its state says so") {
  auto lazy = palrt::testing::run_fresh("collector_without_bootstrap");
  CHECK(lazy.exit_code == 0);
  CHECK(lazy.out == "before: 0, after: 1, on first use: 1\n");
  // A plugin host that initialises it first, as collector.hpp asks.
  auto early = palrt::testing::run_fresh("collector_without_bootstrap", {{"PALRT_TEST_INITIALIZE_FIRST=1"}, {}});
  CHECK(early.exit_code == 0);
  CHECK(early.out == "before: 1, after: 1, on first use: 0\n");
}

TEST_CASE("collector: misuse is reported: an object made without make_object, a collector destroyed too early") {
  auto loose = palrt::testing::run_fresh("object_outside_make_object");
  CHECK(loose.term_signal == SIGABRT);
  CHECK(loose.err.find("palrt: a palrt::gc::object was constructed outside make_object()") != std::string::npos);

  // LeakSanitizer would count the deliberately kept state as a leak.
  auto early =
      palrt::testing::run_fresh("collector_destroyed_with_live_objects", {{"ASAN_OPTIONS=detect_leaks=0"}, {}});
  CHECK(early.exit_code == 0);
  CHECK(early.out == "survived\n");
  CHECK(early.err.find("palrt: collector destroyed with 1 objects not freed") != std::string::npos);
}

// --- Cancellation (collector.hpp, "Cancellation") ------------------------------------------

namespace {
// A finalizer that reaches a cancellation point, as host code does (a write, a read).
struct reaches_a_cancellation_point : finalizable {
  static inline std::atomic<int> runs{0};
  void finalize() override {
    runs.fetch_add(1);
    ::pthread_testcancel();
  }
};
}  // namespace

// In a process of its own: had the finalizer's cancellation point acted inside collect(), the
// unwind would meet the `catch (...)` that contains finalizers' exceptions, and glibc aborts
// the process when an unwind is swallowed.
PALRT_FRESH_PROCESS(collect_with_cancellation_pending) {
  handle_table table;
  collector gc(table);
  std::size_t finalized_inline = 0;
  const palrt::testing::cancellation_outcome o = palrt::testing::call_with_cancel_pending(
      [&] {
        make_object<reaches_a_cancellation_point>(gc).reset();
        finalized_inline = gc.collect().finalized_inline;  // no finalizer thread: runs it here
      },
      {}, {});
  std::printf("returned=%d acted_after=%d finalized_inline=%zu runs=%d\n", o.returned, o.acted_after, finalized_inline,
              reaches_a_cancellation_point::runs.load());
  return 0;
}

TEST_CASE(
    "cancellation: collect() is not a cancellation point, and the finalizers it runs run with cancellation disabled") {
  const auto c = palrt::testing::run_fresh("collect_with_cancellation_pending");
  CHECK(c.term_signal == 0);
  CHECK(c.exit_code == 0);
  CHECK_MESSAGE(c.out == "returned=1 acted_after=1 finalized_inline=1 runs=1\n", c.out << c.err);
}

namespace {
// synchronize() on a thread with a request pending, while a reader holds the grace period
// for all of it: it must run to its timeout, return false, and the request act right after.
// The timeout is long enough for its first ten tries (each a process-wide barrier, which a
// loaded machine may make slow) to pass, so that it reaches the sleeps between later ones.
template <class Driver>
void check_synchronize_runs_its_course(Driver with_request_pending) {
  handle_table table;
  collector gc(table);
  std::latch inside(1), may_leave(1);
  std::thread reader([&] {
    read_section section;
    inside.count_down();
    may_leave.wait();
  });
  inside.wait();
  make_object<node>(gc).reset();
  REQUIRE(gc.collect().awaiting_grace_period == 1);  // the reader holds it
  bool drained = true;
  const palrt::testing::cancellation_outcome o = with_request_pending([&] { drained = gc.synchronize(300ms); }, {}, {});
  may_leave.count_down();
  reader.join();
  CHECK_MESSAGE(o.returned, "synchronize() was unwound: it acted as a cancellation point");
  CHECK(o.acted_after);
  CHECK_FALSE(drained);
  CHECK(gc.synchronize(10s));
}
}  // namespace

TEST_CASE("cancellation: synchronize() is not a cancellation point; a pending pthread_cancel acts after it returned") {
  check_synchronize_runs_its_course(palrt::testing::call_with_cancel_pending);
}

TEST_CASE(
    "cancellation: synchronize() is not a Boost interruption point; a pending interrupt() acts after it returned") {
  check_synchronize_runs_its_course(palrt::testing::call_with_interrupt_pending);
}

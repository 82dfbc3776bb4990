// SPDX-License-Identifier: MIT
// The collector's per-thread dead lists (sync/collector/dead_lists.cpp): nothing lost or taken
// twice under concurrent deaths and collections, an exited thread's list drained and its slot
// reused, the order collector.hpp promises, several collectors, a collector destroyed while
// threads live, and the interleavings the protocol argues about, forced through
// collector_access's hooks (D1/D2: a push that loses to a take; T1/T2: a thread that exits
// between a collection's two takes). The fork() child's slots are in test_fork.cpp.
// No test orders events with a sleep.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/collector_state.hpp"
#include "palrt/gc/object.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "scale.hpp"

using namespace palrt::gc;
using palrt::gc::internal::collector_access;

namespace {

// Finalizers record (tag, sequence) in the order they run: one at a time (the finalizer thread,
// or collect() running them inline), so a plain vector under a lock.
struct finalize_log {
  std::mutex lock;
  std::vector<std::pair<int, int>> runs;
  void record(int tag, int seq) {
    std::lock_guard g(lock);
    runs.emplace_back(tag, seq);
  }
  std::vector<std::pair<int, int>> take() {
    std::lock_guard g(lock);
    return std::exchange(runs, {});
  }
};
finalize_log finalized;

struct logged : finalizable {
  logged(int t, int s) : tag(t), seq(s) {}
  int tag, seq;

 protected:
  void finalize() override { finalized.record(tag, seq); }
};

std::atomic<int> plain_destroyed{0};
struct plain : object {
  ~plain() override { plain_destroyed.fetch_add(1); }
};

// An object that counts its own destruction in a shared table: lost (never destroyed) and
// doubled (destroyed twice) are both visible.
struct counted : object {
  counted(std::vector<std::atomic<int>>& table, std::size_t id) : table_(table), id_(id) {}
  ~counted() override { table_[id_].fetch_add(1, std::memory_order_relaxed); }
  std::vector<std::atomic<int>>& table_;
  std::size_t id_;
};

std::vector<std::pair<int, int>> of_tag(const std::vector<std::pair<int, int>>& runs, int tag) {
  std::vector<std::pair<int, int>> r;
  for (const auto& p : runs)
    if (p.first == tag) r.push_back(p);
  return r;
}

std::string describe(const std::vector<std::pair<int, int>>& runs) {
  std::string s;
  for (const auto& [t, q] : runs) s += std::to_string(t) + ":" + std::to_string(q) + " ";
  return s;
}

}  // namespace

namespace {
// Runs body(w) on `workers` threads, started together, while another thread calls
// gc.collect() in a loop; then `then()` on this thread, still while collections run; then
// stops the collecting thread.
template <class Body, class Then>
void with_concurrent_collections(collector& gc, int workers, Body body, Then then) {
  std::atomic<bool> done{false};
  std::latch start(workers + 1);
  std::thread collecting([&] {
    start.arrive_and_wait();
    while (!done.load(std::memory_order_acquire)) gc.collect();
  });
  std::vector<std::thread> team;
  for (int w = 0; w < workers; ++w)
    team.emplace_back([&, w] {
      start.arrive_and_wait();
      body(w);
    });
  for (auto& t : team) t.join();
  then();
  done.store(true, std::memory_order_release);
  collecting.join();
}
template <class Body>
void with_concurrent_collections(collector& gc, int workers, Body body) {
  with_concurrent_collections(gc, workers, body, [] {});
}
}  // namespace

TEST_CASE("dead lists: threads making and dropping objects while collections run lose none and free none twice") {
  // Each round starts fresh threads, so slots are given back and claimed again while objects
  // sit on their lists; some objects die on a thread other than the one that made them; two
  // threads collect automatically (their own lists) and a third collects everything.
  const int rounds = static_cast<int>(4 * palrt::testing::scale());
  constexpr int workers = 3;
  constexpr std::size_t per_worker = 3000;
  handle_table table;
  collector gc(table, collector_options{.collect_every = 64});
  std::vector<std::atomic<int>> destroyed(static_cast<std::size_t>(rounds) * workers * per_worker);
  for (int round = 0; round < rounds; ++round) {
    std::mutex handoff_lock;
    std::vector<ref<counted>> handoff;  // made on one thread, dropped on another
    const auto work = [&](int w) {
      const std::size_t base = (static_cast<std::size_t>(round) * workers + static_cast<std::size_t>(w)) * per_worker;
      for (std::size_t i = 0; i < per_worker; ++i) {
        ref<counted> o = make_object<counted>(gc, destroyed, base + i);
        if (i % 7 == 0) {
          std::lock_guard g(handoff_lock);
          handoff.push_back(std::move(o));
          if (handoff.size() > 8) handoff.erase(handoff.begin());  // dropped here, made elsewhere
        }
      }
    };
    with_concurrent_collections(gc, workers, work, [&] { handoff.clear(); });
  }
  gc.collect();
  REQUIRE(gc.synchronize());
  std::size_t lost = 0, doubled = 0;
  for (const auto& d : destroyed) {
    const int n = d.load();
    lost += n == 0;
    doubled += n > 1;
  }
  INFO("objects: " << destroyed.size() << ", never freed: " << lost << ", freed more than once: " << doubled);
  CHECK(lost == 0);
  CHECK(doubled == 0);
  CHECK(gc.counters().objects_created == destroyed.size());
  CHECK(gc.counters().objects_freed == destroyed.size());
}

TEST_CASE("dead lists: an exited thread's dead objects are collected, and its slot's next owner comes after it") {
  handle_table table;
  collector gc(table);  // no finalizer thread: collect() runs the finalizers, oldest first
  (void)finalized.take();
  std::uint32_t first_slot = 0, second_slot = 0;
  std::thread([&] {
    first_slot = collector_access::thread_slot();
    for (int i = 0; i < 3; ++i) make_object<logged>(gc, 1, i).reset();
  }).join();
  REQUIRE(first_slot < internal::max_thread_slots);
  CHECK(collector_access::dead_on_slot(gc, first_slot) == 3);  // still there: nobody collected
  std::thread([&] {
    second_slot = collector_access::thread_slot();
    for (int i = 0; i < 2; ++i) make_object<logged>(gc, 2, i).reset();
  }).join();
  // The lowest free slot is claimed: the one the first thread gave back (nothing else in this
  // suite holds a slot above the main thread's).
  CHECK(second_slot == first_slot);
  CHECK(collector_access::dead_on_slot(gc, first_slot) == 5);
  const collection_report r = gc.collect();
  CHECK(r.found_dead == 5);
  CHECK(r.finalized_inline == 5);
  const auto runs = finalized.take();
  INFO("finalized: " << describe(runs));
  CHECK(runs == std::vector<std::pair<int, int>>{{1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}});
  CHECK(gc.collect().freed == 5);
}

TEST_CASE("dead lists: a thread's slot is given back when it exits") {
  const std::size_t before = collector_access::thread_slots_in_use();
  std::latch claimed(1), leave(1);
  std::thread t([&] {
    (void)collector_access::thread_slot();
    claimed.count_down();
    leave.wait();
  });
  claimed.wait();
  CHECK(collector_access::thread_slots_in_use() == before + 1);
  leave.count_down();
  t.join();
  CHECK(collector_access::thread_slots_in_use() == before);
}

TEST_CASE("dead lists: objects that died on one thread are finalized in the order they died, across concurrent "
          "collections") {
  handle_table table;
  collector gc(table);
  finalizer_thread finalizer(gc);
  finalizer.start();
  (void)finalized.take();
  constexpr int threads = 2;
  const int per_thread = static_cast<int>(2000 * palrt::testing::scale());
  with_concurrent_collections(gc, threads, [&](int t) {
    for (int i = 0; i < per_thread; ++i) make_object<logged>(gc, t, i).reset();
  });
  gc.collect();
  REQUIRE(finalizer.wait_for_pending_finalizers(std::chrono::seconds(30)) == pending_finalizers::finalized);
  (void)finalizer.stop();
  gc.collect();
  const auto runs = finalized.take();
  for (int t = 0; t < threads; ++t) {
    const auto mine = of_tag(runs, t);
    std::size_t out_of_order = 0;
    for (std::size_t i = 0; i < mine.size(); ++i) out_of_order += mine[i].second != static_cast<int>(i);
    INFO("thread " << t << ": " << mine.size() << " finalized of " << per_thread << ", " << out_of_order
                   << " out of the order they died in");
    CHECK(mine.size() == static_cast<std::size_t>(per_thread));
    CHECK(out_of_order == 0);
  }
}

TEST_CASE("dead lists: a push that loses its compare-exchange to a collection (between D1 and D2) goes onto the "
          "emptied list: nothing lost, nothing taken twice") {
  handle_table table;
  collector gc(table);
  plain_destroyed = 0;
  const std::uint32_t slot = collector_access::thread_slot();
  make_object<plain>(gc).reset();  // A: the head the next push reads (D1)
  REQUIRE(collector_access::dead_on_slot(gc, slot) == 1);
  struct context {
    collector* gc;
    collection_report report;
  } ctx{&gc, {}};
  const internal::dead_lists::step_hook hook{[](void* p) {
                                               auto* c = static_cast<context*>(p);
                                               // Another thread takes the list (A) between this
                                               // thread's D1 and D2, and frees A.
                                               std::thread([c] { c->report = c->gc->collect(); }).join();
                                             },
                                             &ctx};
  collector_access::hook_next_push(gc, hook);
  make_object<plain>(gc).reset();  // B: D1 reads A, the hook collects, D2 must fail and retry
  CHECK(ctx.report.found_dead == 1);
  CHECK(ctx.report.freed == 1);
  CHECK(plain_destroyed == 1);
  // B alone is on the list, linked to nothing the collection took.
  CHECK(collector_access::dead_on_slot(gc, slot) == 1);
  const collection_report r = gc.collect();
  CHECK(r.found_dead == 1);
  CHECK(r.freed == 1);
  CHECK(plain_destroyed == 2);
}

namespace {
// Holds an object of a thread until the thread's thread_locals are destroyed, after its slot
// was given back (constructed before the slot is claimed, so destroyed after the slot's owner).
struct held_until_exit {
  ref<logged> object;
};
thread_local held_until_exit exit_holder;
}  // namespace

TEST_CASE("dead lists: a thread that exits between a collection's two takes (T1, T2): what it dropped while exiting "
          "comes out no earlier than what it dropped before") {
  handle_table table;
  collector gc(table);
  (void)finalized.take();
  ref<logged> dropped_at_exit = make_object<logged>(gc, 1, 1);
  std::size_t on_shared_after_exit = 0;
  auto run_thread = [&] {
    std::thread([&] {
      exit_holder.object = std::move(dropped_at_exit);  // before the thread's slot is claimed
      make_object<logged>(gc, 1, 0).reset();            // claims the slot: on its own list
    }).join();
    on_shared_after_exit = collector_access::dead_on_shared_list(gc);
  };
  struct context {
    decltype(run_thread)* run;
  } ctx{&run_thread};
  const internal::dead_lists::step_hook hook{[](void* p) { (*static_cast<context*>(p)->run)(); }, &ctx};
  collector_access::hook_next_take(gc, hook);
  const collection_report first = gc.collect();  // T1 (shared: empty), the thread runs and exits, T2
  CHECK(on_shared_after_exit == 1);              // its exit-time death went to the shared list
  CHECK(first.found_dead == 1);                  // its earlier death, taken by T2
  gc.collect();                                  // takes the exit-time death
  const auto runs = finalized.take();
  INFO("finalized: " << describe(runs));
  CHECK(runs == std::vector<std::pair<int, int>>{{1, 0}, {1, 1}});
}

TEST_CASE("dead lists: a thread's death while exiting comes after its earlier deaths within one collection") {
  handle_table table;
  collector gc(table);
  (void)finalized.take();
  ref<logged> dropped_at_exit = make_object<logged>(gc, 1, 2);
  std::thread([&] {
    exit_holder.object = std::move(dropped_at_exit);
    make_object<logged>(gc, 1, 0).reset();
    make_object<logged>(gc, 1, 1).reset();
  }).join();
  CHECK(gc.collect().found_dead == 3);
  const auto runs = finalized.take();
  INFO("finalized: " << describe(runs));
  CHECK(runs == std::vector<std::pair<int, int>>{{1, 0}, {1, 1}, {1, 2}});
}

TEST_CASE("dead lists: one thread's slot has a list in each collector; a collection takes only its own") {
  handle_table t1, t2;
  collector c1(t1), c2(t2);
  plain_destroyed = 0;
  const std::uint32_t slot = collector_access::thread_slot();
  for (int i = 0; i < 2; ++i) make_object<plain>(c1).reset();
  for (int i = 0; i < 3; ++i) make_object<plain>(c2).reset();
  CHECK(collector_access::dead_on_slot(c1, slot) == 2);
  CHECK(collector_access::dead_on_slot(c2, slot) == 3);
  CHECK(c1.collect().found_dead == 2);
  CHECK(collector_access::dead_on_slot(c2, slot) == 3);
  CHECK(c2.collect().found_dead == 3);
  CHECK(plain_destroyed == 5);
}

TEST_CASE("dead lists: a collector destroyed while a thread that used it lives takes that thread's list with it; "
          "the thread then uses the next collector") {
  handle_table table;
  plain_destroyed = 0;
  auto gc = std::make_unique<collector>(table);
  std::latch dropped(1), replaced(1), dropped_again(1);
  std::thread t([&] {
    for (int i = 0; i < 4; ++i) make_object<plain>(*gc).reset();
    dropped.count_down();
    replaced.wait();
    for (int i = 0; i < 2; ++i) make_object<plain>(*gc).reset();  // the new collector (maybe at the same address)
    dropped_again.count_down();
  });
  dropped.wait();
  gc.reset();  // its destructor collects the live thread's list
  CHECK(plain_destroyed == 4);
  gc = std::make_unique<collector>(table);
  replaced.count_down();
  dropped_again.wait();
  CHECK(gc->collect().found_dead == 2);
  CHECK(plain_destroyed == 6);
  t.join();
}

TEST_CASE("dead lists: automatic collections free what died on their own thread; what dies on a thread that never "
          "allocates waits for a full one (every 64th) or collect()") {
  constexpr std::size_t every = 16;
  handle_table table;
  collector gc(table, collector_options{.collect_every = every});
  plain_destroyed = 0;
  std::vector<ref<plain>> made;
  for (int i = 0; i < 10; ++i) made.push_back(make_object<plain>(gc));  // 10 of this thread's count
  std::uint32_t consumer_slot = 0;
  std::thread([&] {
    consumer_slot = collector_access::thread_slot();
    made.clear();  // dead on the consumer's list; the consumer never allocates
  }).join();
  REQUIRE(collector_access::dead_on_slot(gc, consumer_slot) == 10);
  // The next collections of this thread are its own: 6 more objects reach the 16th (the first
  // collection), and so on up to the 63rd collection.
  const std::size_t own_only = 63 * every - 10;
  for (std::size_t i = 0; i < own_only; ++i) make_object<plain>(gc).reset();
  CHECK(gc.counters().collections == 63);
  CHECK(collector_access::dead_on_slot(gc, consumer_slot) == 10);          // untouched by them
  CHECK(plain_destroyed >= static_cast<int>(own_only - 2 * every));        // this thread's own, but the last batches
  for (std::size_t i = 0; i < every; ++i) make_object<plain>(gc).reset();  // the 64th: everything
  CHECK(gc.counters().collections == 64);
  CHECK(collector_access::dead_on_slot(gc, consumer_slot) == 0);
  gc.collect();
  REQUIRE(gc.synchronize());
  CHECK(plain_destroyed == static_cast<int>(10 + own_only + every));
}

TEST_CASE("dead lists: automatic collections, which free outside the lock and share scans, free nothing while a "
          "reader that may still reach it is in its read section") {
  constexpr std::size_t every = 16;
  handle_table table;
  collector gc(table, collector_options{.collect_every = every});
  plain_destroyed = 0;
  std::latch inside(1), leave(1);
  std::thread reader([&] {
    read_section section;
    inside.count_down();
    leave.wait();
  });
  inside.wait();
  // Ten automatic collections of this thread's own dead; every batch was retired after the
  // reader's section began, so neither a scan nor an earlier scan's verdict may pass it.
  for (std::size_t i = 0; i < 10 * every; ++i) make_object<plain>(gc).reset();
  CHECK(gc.counters().collections == 10);
  CHECK(plain_destroyed == 0);
  CHECK_FALSE(gc.synchronize(std::chrono::milliseconds(1)));  // another thread's scan: the same verdict
  leave.count_down();
  reader.join();
  for (std::size_t i = 0; i < 4 * every; ++i) make_object<plain>(gc).reset();
  CHECK(plain_destroyed >= static_cast<int>(10 * every));
}

namespace {
// Runs `n` automatic collections of `every` objects each on the calling thread (each object
// made and dropped at once).
void collect_automatically(collector& gc, std::size_t every, std::size_t n) {
  for (std::size_t i = 0; i < every * n; ++i) make_object<plain>(gc).reset();
}
}  // namespace

TEST_CASE("dead lists: an automatic sweep (every 64th) leaves the list of a thread that collects its own, and "
          "takes it once that thread stopped collecting") {
  constexpr std::size_t every = 16;
  handle_table table;
  collector gc(table, collector_options{.collect_every = every});
  plain_destroyed = 0;
  std::uint32_t other_slot = 0;
  std::thread([&] {
    other_slot = collector_access::thread_slot();
    std::vector<ref<plain>> held;
    for (int i = 0; i < 5; ++i) held.push_back(make_object<plain>(gc));
    // Its own automatic collection (made by its 16th object, which dies after it) marks its
    // list as collected by its owner.
    collect_automatically(gc, 1, every - 5);
    held.clear();  // 5 more dead on its list, left for its next collection
  }).join();
  REQUIRE(collector_access::dead_on_slot(gc, other_slot) == 6);
  collect_automatically(gc, every, 64);  // this thread's 64th: a sweep
  CHECK(gc.counters().collections >= 64);
  CHECK(collector_access::dead_on_slot(gc, other_slot) == 6);  // its owner's to take
  // The owner has not collected since that sweep: the next sweep takes its list.
  collect_automatically(gc, every, 64);
  CHECK(collector_access::dead_on_slot(gc, other_slot) == 0);
  gc.collect();
  REQUIRE(gc.synchronize());
  CHECK(plain_destroyed == static_cast<int>(every + 128 * every));
}

TEST_CASE("dead lists: an automatic sweep that finds the shared list not empty takes everything, so an exiting "
          "thread's death there comes after its earlier ones") {
  constexpr std::size_t every = 16;
  handle_table table;
  collector gc(table, collector_options{.collect_every = every});
  (void)finalized.take();
  ref<logged> dropped_at_exit = make_object<logged>(gc, 1, 2);
  std::uint32_t exiting_slot = 0;
  std::thread([&] {
    exit_holder.object = std::move(dropped_at_exit);  // dropped after its slot is given back
    exiting_slot = collector_access::thread_slot();
    make_object<logged>(gc, 1, 0).reset();
    collect_automatically(gc, 1, every - 2);  // its own collection: its list marked as collected by it
    make_object<logged>(gc, 1, 1).reset();    // dead on its list, after that collection
  }).join();
  REQUIRE(collector_access::dead_on_shared_list(gc) == 1);
  REQUIRE(collector_access::dead_on_slot(gc, exiting_slot) == 1);
  collect_automatically(gc, every, 64);  // the sweep: everything, the marked list too
  CHECK(collector_access::dead_on_shared_list(gc) == 0);
  CHECK(collector_access::dead_on_slot(gc, exiting_slot) == 0);
  gc.collect();  // runs the finalizers the sweep queued, if it did not
  const auto runs = finalized.take();
  INFO("finalized: " << describe(runs));
  CHECK(runs == std::vector<std::pair<int, int>>{{1, 0}, {1, 1}, {1, 2}});
}

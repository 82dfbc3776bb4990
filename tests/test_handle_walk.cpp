// SPDX-License-Identifier: MIT
// The walks a production collector makes (palrt/gc/handle_walk.hpp): generational walks over
// the blocks a young collection condemns and the ages that decide them, the pinned kind,
// GC threads sharing one walk, walks racing allocating and releasing threads, and the
// single pass that sweeps and relocates.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/handle_walk.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"
#include "scale.hpp"
#include "stall_point.hpp"

using namespace palrt::gc;
using palrt::gc::internal::handle_table_access;

namespace {

struct cell {
  alignas(16) int id = 0;
  bool alive = true;
  std::atomic<int> visits{0};
};

std::uintptr_t block_of(handle h) {
  return reinterpret_cast<std::uintptr_t>(h.address()) & ~std::uintptr_t{detail::handle_block_bytes - 1};
}

// The targets a walk's for_each_target gives, as a set (each at most once, or it fails).
std::set<void*> targets_of(handle_walk& walk) {
  std::set<void*> seen;
  walk.for_each_target([&](void* t) { CHECK_MESSAGE(seen.insert(t).second, "a target was visited twice"); });
  return seen;
}

// n handles of `kind`, each to its own cell.
struct handle_set {
  handle_table& table;
  std::vector<std::unique_ptr<cell>> cells;
  std::vector<handle> handles;
  handle_set(handle_table& t, handle_kind kind, std::size_t n) : table(t) {
    for (std::size_t i = 0; i < n; ++i) {
      cells.push_back(std::make_unique<cell>());
      cells.back()->id = static_cast<int>(i);
      handles.push_back(table.allocate(kind, cells.back().get()));
    }
  }
  ~handle_set() {
    for (handle h : handles)
      if (h) (void)table.release(h);
  }
};

}  // namespace

TEST_CASE("handle walk, ages: a young walk visits the blocks stored into since the last collection; a full walk all") {
  handle_table table;
  handle_set old(table, handle_kind::strong, 1200);  // 10 blocks and more
  {
    handle_walk young(table, handle_kind::strong, 0);
    CHECK(targets_of(young).size() == old.handles.size());  // everything is new: young
  }
  table.age_handles(0, 1);  // a young collection: its survivors are old now
  {
    handle_walk young(table, handle_kind::strong, 0);
    CHECK(targets_of(young).empty());
    handle_walk full(table, handle_kind::strong);
    CHECK(targets_of(full).size() == old.handles.size());
  }
  // One store makes its block young again, and only its block: a young walk visits exactly
  // the handles that share it.
  cell fresh;
  const handle retargeted = old.handles[600];
  handle_table::set_target(retargeted, &fresh);
  std::set<void*> expected;
  for (std::size_t i = 0; i < old.handles.size(); ++i) {
    if (block_of(old.handles[i]) == block_of(retargeted)) expected.insert(handle_table::target(old.handles[i]));
  }
  REQUIRE(expected.size() <= handle_table_access::slots_per_block());
  {
    handle_walk young(table, handle_kind::strong, 0);
    CHECK(targets_of(young) == expected);
  }
  // A new handle is young wherever its slot is.
  cell newer;
  const handle added = table.allocate(handle_kind::strong, &newer);
  {
    handle_walk young(table, handle_kind::strong, 0);
    CHECK(targets_of(young).count(&newer) == 1);
  }
  (void)table.release(added);
  // Survivors that stay young (an aging nursery): the blocks stay young.
  table.age_handles(0, 0);
  CHECK(handle_table_access::block_age(retargeted) == 0);
  table.age_handles(0, 1);
  CHECK(handle_table_access::block_age(retargeted) == 1);
}

TEST_CASE("handle walk, ages: set_secondary and a dependent allocate make an old block young") {
  handle_table table;
  cell p, s1, s2;
  const handle d = table.allocate(handle_kind::dependent, &p, &s1);
  table.age_handles(all_generations, 1);
  CHECK(handle_table_access::block_age(d) == 1);
  {
    handle_walk young(table, handle_kind::dependent, 0);
    std::size_t promoted = young.promote_dependents([](void*) { return true; }, [](void*) {});
    CHECK(promoted == 0);  // not walked at all
  }
  table.set_secondary(d, &s2);
  CHECK(handle_table_access::block_age(d) == 0);
  {
    handle_walk young(table, handle_kind::dependent, 0);
    std::vector<void*> marked;
    young.promote_dependents([&](void* o) { return o == &p; }, [&](void* o) { marked.push_back(o); });
    CHECK(marked == std::vector<void*>{&s2});
  }
  (void)table.release(d);
}

TEST_CASE("handle walk, ages: with three generations a block is walked by the collections that condemn its age") {
  handle_table table;
  cell a;
  const handle h = table.allocate(handle_kind::weak_long, &a);
  auto visited = [&](std::uint8_t condemned) {
    handle_walk walk(table, handle_kind::weak_long, condemned);
    return targets_of(walk).count(&a) == 1;
  };
  CHECK(visited(0));
  table.age_handles(0, 1);  // gen 0 survivors into gen 1
  CHECK(handle_table_access::block_age(h) == 1);
  CHECK_FALSE(visited(0));
  CHECK(visited(1));
  table.age_handles(0, 1);  // another young collection: not condemned, unchanged
  CHECK(handle_table_access::block_age(h) == 1);
  table.age_handles(1, 2);  // gen 1 survivors into gen 2
  CHECK(handle_table_access::block_age(h) == 2);
  CHECK_FALSE(visited(1));
  CHECK(visited(2));
  CHECK(visited(all_generations));
  // A young collection that tenures straight into gen 2 may leave gen-1 targets in a block
  // of age 0: the block takes age 1 (condemned + 1), not 2.
  cell b;
  handle_table::set_target(h, &b);
  table.age_handles(0, 2);
  CHECK(handle_table_access::block_age(h) == 1);
  (void)table.release(h);
}

TEST_CASE("handle walk, ages: a collection while a thread sits between its look at the age and its store leaves the "
          "block young") {
  // The window of a mutator stopped by a signal (Boehm's way, or any collector that suspends
  // threads where they are): its first look made the block young, the collection walks the
  // block (the slot still free) and ages it, and then the thread stores a young target. Its
  // second look at the age must make the block young again, or the next young collection
  // misses the target.
  handle_table table;
  cell p0, s0, p1, s1;
  // From a thread that exits: its cache goes back to the block, whose 119 other slots are
  // then free for the mutator's refill below.
  handle first;
  std::thread([&] { first = table.allocate(handle_kind::dependent, &p0, &s0); }).join();
  table.age_handles(0, 1);
  REQUIRE(handle_table_access::block_age(first) == 1);
  palrt::testing::stall_point stall;
  handle_table_access::set_age_window_hook(table, palrt::testing::stall_hook, &stall);
  handle second;
  std::thread mutator([&] {
    palrt::testing::stall_here = true;
    // This thread's cache refills from the blocks: the slot comes from the first handle's
    // block, which holds 119 free slots.
    second = table.allocate(handle_kind::dependent, &p1, &s1);
  });
  stall.paused.acquire();
  // The collection, with the mutator held in the window.
  {
    handle_walk young(table, handle_kind::dependent, 0);
    std::set<void*> seen = targets_of(young);
    CHECK(seen.count(&p0) == 1);  // the block is young: the first look made it so
    CHECK(seen.count(&p1) == 0);  // not stored yet
  }
  table.age_handles(0, 1);
  stall.resume.release();
  mutator.join();
  handle_table_access::set_age_window_hook(table, nullptr, nullptr);
  REQUIRE(block_of(second) == block_of(first));
  CHECK(handle_table_access::block_age(second) == 0);
  handle_walk young(table, handle_kind::dependent, 0);
  CHECK(targets_of(young).count(&p1) == 1);
  (void)table.release(first);
  (void)table.release(second);
}

TEST_CASE(
    "handle walk, pinned: roots include pinned handles, for_each_pinned gives them alone, and they are never swept") {
  handle_table table;
  cell a, b, c;
  const handle strong = table.allocate(handle_kind::strong, &a);
  const handle pinned = table.allocate(handle_kind::pinned, &b);
  const handle weak = table.allocate(handle_kind::weak_short, &c);
  std::set<void*> roots, pins;
  table.for_each_strong([&](void* t) { roots.insert(t); });
  table.for_each_pinned([&](void* t) { pins.insert(t); });
  CHECK(roots == std::set<void*>{&a, &b});
  CHECK(pins == std::set<void*>{&b});
  CHECK_THROWS_AS(table.sweep_weak(handle_kind::pinned, [](void*) { return false; }), std::invalid_argument);
  handle_walk walk(table, handle_kind::pinned);
  CHECK_THROWS_AS(walk.sweep([](void*) { return false; }), std::invalid_argument);
  CHECK_THROWS_AS(walk.sweep_relocate([](void*) -> void* { return nullptr; }), std::invalid_argument);
  CHECK_THROWS_AS(walk.promote_dependents([](void*) { return true; }, [](void*) {}), std::invalid_argument);
  CHECK(handle_table::target(pinned) == &b);
  // A release of a pinned handle does not wait for a closed gate (it is never cleared).
  table.close_tracking_reads();
  std::thread other([&] { CHECK(table.release(pinned) == &b); });
  other.join();
  table.open_tracking_reads();
  CHECK(table.counters().handles[static_cast<std::size_t>(handle_kind::pinned)] == 0);
  (void)table.release(strong);
  (void)table.release(weak);
}

TEST_CASE("handle walk, parallel: GC threads sharing a walk visit each handle once and clear each dead one once") {
  const long scale = palrt::testing::scale();
  const std::size_t n = 20000 * static_cast<std::size_t>(scale);
  constexpr int gc_threads = 4;
  handle_table table;
  handle_set weak(table, handle_kind::weak_short, n);
  handle_set strong(table, handle_kind::strong, n / 2);
  for (std::size_t i = 0; i < n; i += 3) weak.cells[i]->alive = false;

  auto run = [&](auto&& body) {
    std::vector<std::thread> threads;
    for (int t = 0; t < gc_threads; ++t) threads.emplace_back([&] { body(); });
    for (auto& th : threads) th.join();
  };
  // Roots: each strong target once over all threads.
  {
    handle_walk roots(table, handle_kind::strong);
    run([&] { roots.for_each_target([](void* t) { static_cast<cell*>(t)->visits.fetch_add(1); }); });
    std::size_t wrong = 0;
    for (auto& c : strong.cells) wrong += c->visits.exchange(0) != 1;
    CHECK_MESSAGE(wrong == 0, wrong << " of " << strong.cells.size() << " roots not visited exactly once");
  }
  // A sweep: each target tested once, each dead one cleared and reported once.
  {
    handle_walk sweep(table, handle_kind::weak_short);
    std::atomic<std::size_t> cleared{0}, reported{0};
    run([&] {
      cleared += sweep.sweep(
          [](void* t) {
            auto* c = static_cast<cell*>(t);
            c->visits.fetch_add(1);
            return c->alive;
          },
          [&](void*, void*) { reported.fetch_add(1); });
    });
    std::size_t wrong = 0, dead = 0;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += weak.cells[i]->visits.exchange(0) != 1;
      if (!weak.cells[i]->alive) {
        ++dead;
        wrong += handle_table::target(weak.handles[i]) != nullptr;
      } else {
        wrong += handle_table::target(weak.handles[i]) != weak.cells[i].get();
      }
    }
    CHECK_MESSAGE(wrong == 0, wrong << " handles visited other than once, or swept wrongly");
    CHECK(cleared == dead);
    CHECK(reported == dead);
    // The walk is one pass: calling it again does nothing.
    CHECK(sweep.sweep([](void*) { return false; }) == 0);
  }
  // The batched sweep, shared: the rest die.
  {
    handle_walk sweep(table, handle_kind::weak_short);
    std::atomic<std::size_t> cleared{0};
    run([&] {
      cleared += sweep.sweep_batched([](std::span<void* const> targets, std::span<bool> alive) {
        for (std::size_t i = 0; i < targets.size(); ++i) alive[i] = false;
      });
    });
    CHECK(cleared == n - (n + 2) / 3);
  }
}

TEST_CASE("handle walk, parallel: a shared promotion round marks each secondary once") {
  handle_table table;
  const std::size_t n = 5000;
  std::vector<std::unique_ptr<cell>> primaries, secondaries;
  std::vector<handle> handles;
  for (std::size_t i = 0; i < n; ++i) {
    primaries.push_back(std::make_unique<cell>());
    secondaries.push_back(std::make_unique<cell>());
    secondaries.back()->alive = false;
    primaries.back()->alive = i % 2 == 0;
    handles.push_back(table.allocate(handle_kind::dependent, primaries.back().get(), secondaries.back().get()));
  }
  handle_walk round(table, handle_kind::dependent);
  std::atomic<std::size_t> marked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      marked += round.promote_dependents([](void* o) { return static_cast<cell*>(o)->alive; },
                                         [](void* o) { static_cast<cell*>(o)->visits.fetch_add(1); });
    });
  for (auto& th : threads) th.join();
  CHECK(marked == n / 2);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += secondaries[i]->visits.load() != (i % 2 == 0 ? 1 : 0);
  CHECK_MESSAGE(wrong == 0, wrong << " secondaries marked other than as often as their primary lives");
  for (handle h : handles) (void)table.release(h);
}

TEST_CASE("handle walk, concurrent: a full walk racing allocating and releasing threads visits every handle that lived "
          "throughout, once, and no free slot") {
  const long scale = palrt::testing::scale();
  handle_table table;
  handle_set stable(table, handle_kind::weak_long, 3000);
  std::atomic<bool> stop{false};
  std::atomic<long> churned{0};
  cell churn_target;
  auto churner = [&] {
    std::vector<handle> mine;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 300; ++i) mine.push_back(table.allocate(handle_kind::weak_long, &churn_target));
      for (handle h : mine) (void)table.release(h);
      mine.clear();
      churned.fetch_add(300, std::memory_order_relaxed);
    }
  };
  std::thread a(churner), b(churner);
  // Each walk after the churners have done some work: the walks overlap the churn.
  std::size_t bad = 0, missing = 0, twice = 0;
  const int walks = 40 * static_cast<int>(scale);
  for (int w = 0; w < walks; ++w) {
    const long before = churned.load();
    while (churned.load() == before) std::this_thread::yield();
    std::map<void*, int> seen;
    handle_walk walk(table, handle_kind::weak_long);
    walk.for_each_slot([&](handle_slot s) {
      void* t = s.target();
      if (t && t != &churn_target) ++seen[t];
    });
    for (auto& c : stable.cells) {
      auto it = seen.find(c.get());
      if (it == seen.end())
        ++missing;
      else if (it->second != 1)
        ++twice;
    }
    handle_walk targets(table, handle_kind::weak_long);
    targets.for_each_target([&](void* t) { bad += t == detail::free_slot_marker(); });
  }
  stop = true;
  a.join();
  b.join();
  CHECK_MESSAGE(bad == 0, bad << " free markers handed out");
  CHECK_MESSAGE(missing == 0, missing << " handles that lived throughout a walk were not visited");
  CHECK_MESSAGE(twice == 0, twice << " handles visited more than once in one walk");
  CHECK(churned.load() > 0);
}

TEST_CASE("handle walk, concurrent: GC threads sharing sweeps while other threads allocate and release clear exactly "
          "the dead handles that lived throughout, and test no free slot") {
  const long scale = palrt::testing::scale();
  handle_table table;
  handle_set stable(table, handle_kind::weak_short, 4000);
  for (std::size_t i = 0; i < stable.cells.size(); i += 2) stable.cells[i]->alive = false;
  cell churn_dead;
  churn_dead.alive = false;
  std::atomic<bool> stop{false};
  std::atomic<long> churned{0}, bad_release{0};
  std::thread churner([&] {
    std::vector<handle> mine;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 200; ++i) mine.push_back(table.allocate(handle_kind::weak_short, &churn_dead));
      for (handle h : mine) {
        void* old = table.release(h);
        if (old != &churn_dead && old != nullptr) bad_release.fetch_add(1);  // its target, or cleared
      }
      mine.clear();
      churned.fetch_add(200, std::memory_order_relaxed);
    }
  });
  std::atomic<long> marker_tested{0};
  const int rounds = 30 * static_cast<int>(scale);
  std::size_t wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    const long before = churned.load();
    while (churned.load() == before) std::this_thread::yield();
    handle_walk walk(table, handle_kind::weak_short);
    std::vector<std::thread> gc;
    for (int t = 0; t < 2; ++t)
      gc.emplace_back([&] {
        walk.sweep([&](void* o) {
          if (o == detail::free_slot_marker()) marker_tested.fetch_add(1);
          return static_cast<cell*>(o)->alive;
        });
      });
    for (auto& t : gc) t.join();
    for (std::size_t i = 0; i < stable.cells.size(); ++i) {
      void* t = handle_table::target(stable.handles[i]);
      wrong += stable.cells[i]->alive ? t != stable.cells[i].get() : t != nullptr;
    }
    // The dead ones are cleared now; make them dead targets again for the next round.
    for (std::size_t i = 0; i < stable.cells.size(); i += 2)
      handle_table::set_target(stable.handles[i], stable.cells[i].get());
  }
  stop = true;
  churner.join();
  CHECK_MESSAGE(wrong == 0, wrong << " handles that lived throughout a sweep were swept wrongly");
  CHECK_MESSAGE(marker_tested == 0, marker_tested.load() << " free markers handed to is_alive");
  CHECK_MESSAGE(bad_release == 0, bad_release.load() << " releases returned something else than the target or null");
}

TEST_CASE("handle walk, concurrent: a walk held between two slots while the table grows past a page table of its "
          "directory reads on, and misses nothing") {
  // The directory's page table is replaced by a larger one as the kind grows (4 pages of 256
  // blocks, then 8, ...); a walk that read the old table keeps reading it (it is kept until
  // the table is destroyed). ASan would report a read of a freed one.
  handle_table table;
  handle_set before(table, handle_kind::weak_short, 2000);
  palrt::testing::stall_point stall;
  handle_table_access::set_slot_walk_hook(table, palrt::testing::stall_hook, &stall);
  std::set<void*> seen;
  std::thread walker([&] {
    handle_walk walk(table, handle_kind::weak_short);
    palrt::testing::stall_here = true;  // held at the first slot
    walk.for_each_slot([&](handle_slot s) {
      if (void* t = s.target()) seen.insert(t);
    });
  });
  stall.paused.acquire();
  // Past 1024 blocks (122,880 handles): the page table is replaced at least once.
  const std::size_t blocks_before = table.counters().blocks;
  handle_set grown(table, handle_kind::weak_short, 130000);
  CHECK(table.counters().blocks >= blocks_before + 1024);
  stall.resume.release();
  walker.join();
  handle_table_access::set_slot_walk_hook(table, nullptr, nullptr);
  std::size_t missing = 0;
  for (auto& c : before.cells) missing += seen.count(c.get()) == 0;
  CHECK_MESSAGE(missing == 0, missing << " handles that lived throughout the walk were not visited");
}

TEST_CASE("handle walk, sweep_relocate: clears the dead, relocates the moved and forwards the secondaries of living "
          "primaries") {
  handle_table table;
  cell dead_one, stays, moves_from, moves_to, p_from, p_to, s_from, s_to, q_dead, q_second;
  dead_one.alive = false;
  q_dead.alive = false;
  const handle w1 = table.allocate(handle_kind::weak_short, &dead_one);
  const handle w2 = table.allocate(handle_kind::weak_short, &stays);
  const handle w3 = table.allocate(handle_kind::weak_short, &moves_from);
  const handle d1 = table.allocate(handle_kind::dependent, &p_from, &s_from);
  const handle d2 = table.allocate(handle_kind::dependent, &q_dead, &q_second);
  auto forward = [&](void* t) -> void* {
    if (t == &moves_from) return &moves_to;
    if (t == &p_from) return &p_to;
    if (t == &s_from) return &s_to;
    return static_cast<cell*>(t)->alive ? t : nullptr;
  };
  std::vector<std::pair<void*, void*>> reported;
  auto on_cleared = [&](void* t, void* s) { reported.emplace_back(t, s); };
  handle_walk weak(table, handle_kind::weak_short);
  CHECK(weak.sweep_relocate(forward, on_cleared) == 1);
  CHECK(handle_table::target(w1) == nullptr);
  CHECK(handle_table::target(w2) == &stays);
  CHECK(handle_table::target(w3) == &moves_to);
  handle_walk dependents(table, handle_kind::dependent);
  CHECK(dependents.sweep_relocate(forward, on_cleared) == 1);
  CHECK(handle_table::target(d1) == &p_to);
  CHECK(table.secondary(d1) == &s_to);
  CHECK(handle_table::target(d2) == nullptr);
  CHECK(table.secondary(d2) == nullptr);
  using report = std::pair<void*, void*>;
  CHECK(reported == std::vector<report>{{&dead_one, nullptr}, {&q_dead, &q_second}});
  for (handle h : {w1, w2, w3, d1, d2}) (void)table.release(h);
}

TEST_CASE("handle walk, sweep_relocate: a mutator stopped before its store of a secondary stores after the relocation, "
          "and its store wins") {
  // sweep_relocate runs with the world stopped and relocates with plain stores: a mutator
  // stopped between deciding to store and storing (here: inside set_secondary, held at the
  // hook before its store) stores after it resumes.
  handle_table table;
  cell primary, old_secondary, moved_secondary, new_secondary;
  const handle d = table.allocate(handle_kind::dependent, &primary, &old_secondary);
  palrt::testing::stall_point stall;
  handle_table_access::set_age_window_hook(table, palrt::testing::stall_hook, &stall);
  std::thread mutator([&] {
    palrt::testing::stall_here = true;
    table.set_secondary(d, &new_secondary);
  });
  stall.paused.acquire();
  handle_walk walk(table, handle_kind::dependent);
  CHECK(walk.sweep_relocate([&](void* t) -> void* { return t == &old_secondary ? &moved_secondary : t; }) == 0);
  CHECK(table.secondary(d) == &moved_secondary);
  stall.resume.release();
  mutator.join();
  handle_table_access::set_age_window_hook(table, nullptr, nullptr);
  CHECK(table.secondary(d) == &new_secondary);
  CHECK(handle_table::target(d) == &primary);
  (void)table.release(d);
}

TEST_CASE(
    "handle walk: a walk of an unknown kind is refused, and a walk covers the blocks that existed when it was made") {
  handle_table table;
  CHECK_THROWS_AS(handle_walk(table, static_cast<handle_kind>(9)), std::invalid_argument);
  cell a;
  handle_walk early(table, handle_kind::strong);  // no block yet
  const handle h = table.allocate(handle_kind::strong, &a);
  CHECK(targets_of(early).empty());
  handle_walk later(table, handle_kind::strong);
  CHECK(targets_of(later) == std::set<void*>{&a});
  (void)table.release(h);
}

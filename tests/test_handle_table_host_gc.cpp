// SPDX-License-Identifier: MIT
// The handle table driven by a host's own collector: the calls a collector makes with the
// world stopped take no lock a stopped thread may hold, batched liveness, slots a moving
// collector relocates, and the read gate for weak-long and dependent targets while a
// collection is between its mark and its sweeps.
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <span>
#include <thread>
#include <vector>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"
#include "subprocess.hpp"

using namespace palrt::gc;
using palrt::gc::internal::handle_table_access;

namespace {

struct cell {
  alignas(16) int id = 0;
  bool alive = true;
};

// Waits (yielding) until `done()`: for an event the code under test signals through a counter.
template <class Done>
void wait_until(Done done) {
  while (!done()) std::this_thread::yield();
}

}  // namespace

TEST_CASE("handle table, host GC: the world-stopped calls take no lock a stopped thread can hold") {
  // A stopped mutator may hold any of the table's locks: inside allocate(), a refill holds its
  // kind's lock and a growing table the lock that records blocks. Here this thread holds them
  // all, and every call the header allows with the world stopped must still complete (before,
  // a checked build's secondary() took the block lock and deadlocked).
  handle_table table;
  std::vector<cell> cells(300);
  std::vector<handle> weak, dependent, strong;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    cells[i].id = static_cast<int>(i);
    weak.push_back(table.allocate(handle_kind::weak_short, &cells[i]));
    strong.push_back(table.allocate(handle_kind::strong, &cells[i]));
    dependent.push_back(table.allocate(handle_kind::dependent, &cells[i], &cells[(i + 1) % cells.size()]));
    cells[i].alive = i % 3 != 0;
  }
  {
    std::vector<std::unique_lock<std::mutex>> held;
    for (handle_kind k : {handle_kind::strong, handle_kind::weak_short, handle_kind::weak_long, handle_kind::dependent})
      held.push_back(handle_table_access::hold_kind_lock(table, k));
    held.push_back(handle_table_access::hold_all_blocks_lock(table));
    auto alive = [](void* t) { return static_cast<cell*>(t)->alive; };
    table.close_tracking_reads();
    std::size_t roots = 0;
    table.for_each_strong([&](void*) { ++roots; });
    CHECK(roots == cells.size());
    std::size_t marked = table.promote_dependents(alive, [](void*) {});
    CHECK(marked > 0);
    for (handle h : dependent) CHECK(table.secondary(h) != nullptr);
    CHECK(table.kind(dependent[0]) == handle_kind::dependent);
    CHECK(table.gated_secondary(dependent[1]) == &cells[2]);  // the closer reads through
    CHECK(table.sweep_weak(handle_kind::weak_short, alive) == 100);
    CHECK(table.sweep_weak_batched(handle_kind::dependent,
                                   [](std::span<void* const> t, std::span<bool> a) {
                                     for (std::size_t i = 0; i < t.size(); ++i) a[i] = static_cast<cell*>(t[i])->alive;
                                   }) == 100);
    std::size_t slots = 0;
    table.for_each_slot(handle_kind::weak_short, [&](handle_slot) { ++slots; });
    CHECK(slots == cells.size());
    table.open_tracking_reads();
    CHECK(handle_table::target(weak[0]) == nullptr);
    CHECK(handle_table::target(weak[1]) == &cells[1]);
  }
  for (auto* v : {&weak, &dependent, &strong})
    for (handle h : *v) table.release(h);
}

TEST_CASE("handle table, host GC: the batched sweep calls the liveness test once per batch and clears the dead") {
  handle_table table;
  const std::size_t n = 3 * handle_table::sweep_batch + 17;
  std::vector<cell> cells(n), secondaries(n);
  std::vector<handle> hs;
  for (std::size_t i = 0; i < n; ++i) {
    cells[i].alive = i % 4 != 1;
    hs.push_back(table.allocate(handle_kind::dependent, &cells[i], &secondaries[i]));
  }
  hs.push_back(table.allocate(handle_kind::dependent, nullptr, nullptr));  // null targets are not asked about
  std::size_t calls = 0, asked = 0, largest = 0;
  std::set<void*> reported;
  const std::size_t cleared = table.sweep_weak_batched(
      handle_kind::dependent,
      [&](std::span<void* const> targets, std::span<bool> alive) {
        ++calls;
        asked += targets.size();
        largest = std::max(largest, targets.size());
        REQUIRE(alive.size() == targets.size());
        for (std::size_t i = 0; i < targets.size(); ++i) {
          REQUIRE(targets[i] != nullptr);
          alive[i] = static_cast<cell*>(targets[i])->alive;
        }
      },
      [&](void* target, void* secondary) {
        CHECK_FALSE(static_cast<cell*>(target)->alive);
        CHECK(secondary == &secondaries[static_cast<cell*>(target) - cells.data()]);
        reported.insert(target);
      });
  CHECK(calls == 4);
  CHECK(asked == n);
  CHECK(largest == handle_table::sweep_batch);
  CHECK(cleared == n / 4 + (n % 4 > 1 ? 1 : 0));
  CHECK(reported.size() == cleared);
  for (std::size_t i = 0; i < n; ++i) CHECK((handle_table::target(hs[i]) == nullptr) == !cells[i].alive);
  // A test that sets nothing keeps everything.
  CHECK(table.sweep_weak_batched(handle_kind::dependent, [](std::span<void* const>, std::span<bool>) {}) == 0);
  CHECK_THROWS_AS(table.sweep_weak_batched(handle_kind::strong, [](std::span<void* const>, std::span<bool>) {}),
                  std::invalid_argument);
  for (handle h : hs) table.release(h);
}

TEST_CASE("handle table, host GC: a moving collector visits every slot and relocates targets by compare-and-swap") {
  handle_table table;
  std::vector<cell> from(50), to(50), sfrom(50), sto(50);
  std::vector<handle> strong, dependent;
  for (std::size_t i = 0; i < from.size(); ++i) {
    strong.push_back(table.allocate(handle_kind::strong, &from[i]));
    dependent.push_back(table.allocate(handle_kind::dependent, &from[i], &sfrom[i]));
  }
  auto moved = [&](std::vector<cell>& a, std::vector<cell>& b, void* p) -> void* {
    return &b[static_cast<cell*>(p) - a.data()];
  };
  std::size_t visited = 0;
  table.for_each_slot(handle_kind::strong, [&](handle_slot slot) {
    ++visited;
    void* t = slot.target();
    CHECK(slot.secondary() == nullptr);
    CHECK_FALSE(slot.relocate_secondary(nullptr, t));
    CHECK(slot.relocate(t, moved(from, to, t)));
    CHECK_FALSE(slot.relocate(t, nullptr));  // it holds the new address now
  });
  CHECK(visited == from.size());
  table.for_each_slot(handle_kind::dependent, [&](handle_slot slot) {
    void* t = slot.target();
    void* s = slot.secondary();
    CHECK(slot.relocate(t, moved(from, to, t)));
    CHECK(slot.relocate_secondary(s, moved(sfrom, sto, s)));
    CHECK(table.secondary(slot.as_handle()) == moved(sfrom, sto, s));
  });
  for (std::size_t i = 0; i < from.size(); ++i) {
    CHECK(handle_table::target(strong[i]) == &to[i]);
    CHECK(handle_table::target(dependent[i]) == &to[i]);
    CHECK(table.secondary(dependent[i]) == &sto[i]);
  }
  // A slot released during the walk (a mutator racing a collector that does not stop it) is
  // left alone: the relocation fails on the free marker, and the slot stays free.
  table.for_each_slot(handle_kind::strong, [&](handle_slot slot) {
    void* t = slot.target();
    table.release(slot.as_handle());
    CHECK_FALSE(slot.relocate(t, &from[0]));
  });
  std::size_t left = 0;
  table.for_each_slot(handle_kind::strong, [&](handle_slot) { ++left; });
  CHECK(left == 0);
  for (handle h : dependent) table.release(h);
}

TEST_CASE("handle table, host GC: a weak-long read during a collection waits for the sweep, then sees it") {
  // Before: a read between the world restarting and the weak-long sweep returned the dead
  // object the collector was about to reclaim (2000 of 2000 reads in the Boehm host).
  handle_table table;
  cell dead, live;
  dead.alive = false;
  handle hd = table.allocate(handle_kind::weak_long, &dead);
  handle hl = table.allocate(handle_kind::weak_long, &live);
  CHECK(table.gated_target(hd) == &dead);  // open: the plain read
  const long rounds = 200;
  long saw_dead = 0, reads = 0;
  for (long r = 0; r < rounds; ++r) {
    table.close_tracking_reads();  // the mark ended: `dead` is unmarked, still in its slot
    CHECK(table.gated_target(hd) == &dead);  // the collector itself reads through
    std::atomic<int> phase{0};
    void* read_dead = &live;
    void* read_live = nullptr;
    std::thread mutator([&] {
      phase.store(1);
      read_dead = table.gated_target(hd);
      read_live = table.gated_target(hl);
    });
    // The mutator is inside its read, waiting (the table counts it), before the sweep runs.
    wait_until([&] { return handle_table_access::gate_waiters(table) == 1; });
    CHECK(table.sweep_weak(handle_kind::weak_long, [](void* t) { return static_cast<cell*>(t)->alive; }) == 1);
    table.open_tracking_reads();
    mutator.join();
    reads += 2;
    if (read_dead == &dead) ++saw_dead;
    CHECK(read_live == &live);
    table.set_target(hd, &dead);  // the next round's dead object
  }
  INFO(saw_dead << " of " << rounds << " reads returned the dead object");
  CHECK(saw_dead == 0);
  CHECK(reads == 2 * rounds);
  table.release(hd);
  table.release(hl);
}

TEST_CASE("handle table, host GC: a gated read that overlaps the gate closing reads again") {
  // The interleaving the gate's second look exists for: a mutator reads the slot with the gate
  // open, the world stops and the mark ends before it looks at the gate again. Forced with the
  // test hook between its reads and that look; the read through gated_secondary(), whose
  // dependent primary the sweep then clears, must come back null, not the secondary read early.
  handle_table table;
  cell primary, secondary;
  primary.alive = false;
  handle h = table.allocate(handle_kind::dependent, &primary, &secondary);
  struct context {
    handle_table* table;
    std::atomic<int> hooked{0};
    std::atomic<bool> closed{false};
  } ctx{&table};
  handle_table_access::set_gated_read_hook(
      table,
      [](void* p) {
        auto* c = static_cast<context*>(p);
        if (c->hooked.fetch_add(1) == 0) wait_until([&] { return c->closed.load(); });
      },
      &ctx);
  void* read = &primary;
  std::thread mutator([&] { read = table.gated_secondary(h); });
  wait_until([&] { return ctx.hooked.load() == 1; });  // it has read the secondary, gate open
  table.close_tracking_reads();
  ctx.closed.store(true);
  wait_until([&] { return handle_table_access::gate_waiters(table) == 1; });  // it looked again
  CHECK(table.sweep_weak(handle_kind::dependent, [](void* t) { return static_cast<cell*>(t)->alive; }) == 1);
  table.open_tracking_reads();
  mutator.join();
  handle_table_access::set_gated_read_hook(table, nullptr, nullptr);
  CHECK(read == nullptr);
  CHECK(ctx.hooked.load() == 2);  // read once, then again after the gate opened
  table.release(h);
}

PALRT_FRESH_PROCESS(gate_closed_twice) {
  handle_table table;
  table.close_tracking_reads();
  table.close_tracking_reads();
  return 0;
}

PALRT_FRESH_PROCESS(gate_opened_when_open) {
  handle_table table;
  table.close_tracking_reads();
  table.open_tracking_reads();
  table.open_tracking_reads();
  return 0;
}

TEST_CASE("handle table, host GC: closing a closed gate or opening an open one aborts with a message") {
  // Two collections at once, or an open without its close: a host bug no later call can undo.
  struct expectation {
    const char* fresh;
    const char* message;
  };
  for (const expectation e : {expectation{"gate_closed_twice", "close_tracking_reads((nil)): the gate is closed already"},
                              expectation{"gate_opened_when_open", "open_tracking_reads((nil)): the gate is not closed"}}) {
    CAPTURE(e.fresh);
    const auto r = palrt::testing::run_fresh(e.fresh);
    CHECK(r.term_signal == SIGABRT);
    CHECK(r.err.find(std::string("palrt: handle_table::") + e.message) != std::string::npos);
  }
}

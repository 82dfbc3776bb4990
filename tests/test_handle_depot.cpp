// SPDX-License-Identifier: MIT
// The handle table's depot of free-slot batches (internal/batch_depot.hpp): threads whose
// working sets exceed their caches refill from it and return to it while sweeps, iteration
// and thread exits go on, and nothing is lost or handed out twice. The interleavings the
// depot's protocol argues about are forced through handle_table_access's hooks: a pop stalled
// between reading the top's successor and its compare-exchange (the ABA window), and a thread
// holding a batch that is on no stack.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <semaphore>
#include <set>
#include <thread>
#include <vector>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"
#include "palrt/pal/cpu.hpp"
#include "handle_cells.hpp"
#include "scale.hpp"
#include "stall_point.hpp"

using namespace palrt::gc;
using palrt::gc::internal::handle_table_access;
using palrt::testing::stall_here;
using palrt::testing::stall_hook;
using palrt::testing::stall_point;

namespace {

constexpr handle_kind kind = handle_kind::weak_short;
constexpr std::size_t cache_capacity = 256;  // detail::handle_cache: what a thread's cache holds
constexpr std::size_t batch = 128;           // and what it moves at a time

using palrt::testing::cell;
using palrt::testing::total;

// Which slots are live handles now, to catch one handed out twice at the moment it happens:
// claim() when a handle is allocated (false if its slot is live already), drop() just before
// it is released. Lock-free (open addressing, keys never removed), so it adds no ordering the
// table does not provide itself.
class live_slots {
 public:
  bool claim(const void* slot) { return entry(slot).exchange(1, std::memory_order_relaxed) == 0; }
  void drop(const void* slot) { entry(slot).store(0, std::memory_order_relaxed); }

 private:
  static constexpr unsigned bits = 17;
  std::atomic<std::uint8_t>& entry(const void* slot) {
    const auto key = reinterpret_cast<std::uintptr_t>(slot);
    for (std::size_t i = static_cast<std::size_t>((key >> 3) * 0x9E3779B97F4A7C15u >> (64 - bits));;
         i = (i + 1) & (keys_.size() - 1)) {
      std::uintptr_t k = keys_[i].load(std::memory_order_relaxed);
      if (k == 0 && keys_[i].compare_exchange_strong(k, key, std::memory_order_relaxed)) return live_[i];
      if (k == key) return live_[i];
    }
  }
  std::vector<std::atomic<std::uintptr_t>> keys_ = std::vector<std::atomic<std::uintptr_t>>(std::size_t{1} << bits);
  std::vector<std::atomic<std::uint8_t>> live_ = std::vector<std::atomic<std::uint8_t>>(std::size_t{1} << bits);
};

// After every other thread is gone: every slot of the table's blocks of `kind` can be
// allocated again (none lost in a cache, the depot or a batch in transit), distinct, without
// growing the table; then releases them and leaves the table empty.
void check_every_slot_allocatable(handle_table& table) {
  const handle_counters before = table.counters();
  REQUIRE(total(before) == 0);
  const std::size_t slots = before.blocks * handle_table_access::slots_per_block();
  cell c;
  std::vector<handle> all;
  std::set<const void*> distinct;
  for (std::size_t i = 0; i < slots; ++i) {
    all.push_back(table.allocate(kind, &c));
    distinct.insert(all.back().address());
  }
  CHECK(distinct.size() == slots);
  CHECK(table.counters().blocks == before.blocks);  // no slot was missing: the table did not grow
  for (handle h : all) table.release(h);
  CHECK(total(table.counters()) == 0);
}

}  // namespace

TEST_CASE("handle depot: threads whose working sets exceed their caches, beside sweeps, iteration and exiting "
          "threads, lose no slot and hand none out twice") {
  // Each worker allocates a working set well above its cache (refills and returns every
  // round, through the depot, and past its cap to the blocks), checks every target it reads,
  // and releases in alternating orders. A sweeper clears the dead cells' handles, an iterator
  // walks the slots and counts, and short-lived threads allocate, release and exit with full
  // caches meanwhile. live_slots sees a slot handed out twice when it happens.
  constexpr int workers = 4;
  constexpr std::size_t working_set = 700;
  const int rounds = static_cast<int>(100 * palrt::testing::scale());
  const int exits = static_cast<int>(30 * palrt::testing::scale());
  handle_table table;
  std::vector<cell> cells((workers + 1) * working_set);  // the last working set: the exiting threads'
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i].alive = i % 7 != 0;
  const auto is_cell = [&](void* t) { return t >= cells.data() && t < cells.data() + cells.size(); };
  live_slots live;
  std::atomic<long> doubled{0}, wrong_target{0}, allocated{0}, released{0}, bad_visit{0}, swept{0};
  std::atomic<bool> done{false};

  // Allocates `n` handles to cells[first..], checks them, releases them (forward or backward).
  const auto round_trip = [&](std::size_t first, std::size_t n, bool backward) {
    std::vector<handle> mine(n);
    for (std::size_t i = 0; i < n; ++i) {
      mine[i] = table.allocate(kind, &cells[first + i]);
      if (!live.claim(mine[i].address())) doubled.fetch_add(1);
    }
    allocated.fetch_add(static_cast<long>(n));
    for (std::size_t i = 0; i < n; ++i) {
      void* t = handle_table::target(mine[i]);
      if (t != &cells[first + i] && !(t == nullptr && !cells[first + i].alive)) wrong_target.fetch_add(1);
    }
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t i = backward ? n - 1 - j : j;
      live.drop(mine[i].address());
      void* old = table.release(mine[i]);
      if (old != &cells[first + i] && !(old == nullptr && !cells[first + i].alive)) wrong_target.fetch_add(1);
    }
    released.fetch_add(static_cast<long>(n));
  };

  std::thread sweeper([&] {
    while (!done.load())
      swept.fetch_add(static_cast<long>(table.sweep_weak(kind, [](void* t) { return static_cast<cell*>(t)->alive; })));
  });
  std::thread iterator([&] {
    while (!done.load()) {
      table.for_each_slot(kind, [&](handle_slot s) {
        void* t = s.target();
        // Null (swept), a cell, or the free marker (released since the walk looked at it).
        if (t != nullptr && t != palrt::gc::detail::free_slot_marker() && !is_cell(t)) bad_visit.fetch_add(1);
      });
      if (table.counters().handles[static_cast<std::size_t>(kind)] > cells.size()) bad_visit.fetch_add(1);
    }
  });
  std::thread exiting([&] {
    for (int e = 0; e < exits; ++e) {
      // Its cache is not empty when it exits: the exit returns it while the others run.
      std::thread([&, e] {
        round_trip(workers * working_set, working_set / 2 + static_cast<std::size_t>(e % 3) * 50, e % 2);
      }).join();
    }
  });
  std::vector<std::thread> team;
  for (int w = 0; w < workers; ++w)
    team.emplace_back([&, w] {
      for (int r = 0; r < rounds; ++r) round_trip(static_cast<std::size_t>(w) * working_set, working_set, r % 2);
    });
  for (auto& t : team) t.join();
  exiting.join();
  done = true;
  sweeper.join();
  iterator.join();

  INFO("allocated " << allocated.load() << ", released " << released.load() << ", swept " << swept.load());
  CHECK(doubled.load() == 0);       // no slot was a live handle twice
  CHECK(wrong_target.load() == 0);  // every handle held its own target, or null for a dead cell
  CHECK(bad_visit.load() == 0);     // iteration saw only handles; counters never overcounted
  CHECK(released.load() == allocated.load());
  CHECK(total(table.counters()) == 0);  // every thread gone, every cache returned: no handle left
  check_every_slot_allocatable(table);
}

TEST_CASE("handle depot: a pop stalled between reading the top's successor and its exchange, while the top is "
          "taken and put back on another batch, takes the top once and nothing twice (ABA)") {
  // The stack heads carry a tag that every exchange moves; without it, the stalled pop below
  // would install a batch that is already on another shard's stack, and its slots would be
  // handed out twice. The steps are forced: the stalled thread P takes from shard 0, this
  // thread M pins its home shard to take and put on chosen shards meanwhile, and watches the
  // depot's batches to know when each step happened.
  handle_table table;
  handle_table_access::use_depot(table, kind, 2, 8);  // one chunk of containers: made on the first return
  const std::size_t containers = handle_table_access::depot_capacity(table, kind);
  const auto batches = [&] { return handle_table_access::depot_full_batches(table, kind); };
  stall_point s;
  handle_table_access::set_depot_pop_hook(table, kind, &stall_hook, &s);
  cell c;
  std::vector<handle> m_live;
  std::size_t oldest = 0;  // m_live[oldest..] are live
  // Allocates until the depot holds `n` full batches (a refill took one), or releases, oldest
  // first, until it does (a return put one there).
  const auto allocate_until = [&](std::size_t n) {
    while (batches() != n) m_live.push_back(table.allocate(kind, &c));
  };
  const auto release_until = [&](std::size_t n) {
    while (batches() != n) table.release(m_live.at(oldest++));
  };

  // Shard 0's full stack: [A, B], and no spare container on shard 0's empty stack (a return
  // made on shard 0 takes one from shard 1's then). M's releases return batches past its
  // cache on shard 0 until every container is full (all were made there, at the first); M
  // takes them all from shard 1 (the containers go to shard 1's empty stack), and returns
  // two on shard 0 again.
  handle_table_access::set_depot_home_shard(0);
  for (std::size_t i = 0; i < (containers + 4) * batch; ++i) m_live.push_back(table.allocate(kind, &c));
  release_until(containers);
  handle_table_access::set_depot_home_shard(1);
  allocate_until(0);
  handle_table_access::set_depot_home_shard(0);
  release_until(2);

  // P refills from shard 0: its pop reads the top (A) and A's successor (B), and stalls.
  handle p_handle;
  std::binary_semaphore p_allocated{0}, p_finish{0};
  std::thread p([&] {
    handle_table_access::set_depot_home_shard(0);
    stall_here = true;
    p_handle = table.allocate(kind, &c);
    p_allocated.release();
    p_finish.acquire();
    table.release(p_handle);
  });
  s.paused.acquire();

  // Meanwhile M, home shard 1, steals A, then B, from shard 0 (their containers go to shard
  // 1's empty stack: [B, A]). Then it returns two batches: the first into container B, onto
  // shard 1; the second, home shard 0 now, steals container A and puts it on shard 0 alone:
  // A is shard 0's top again, with no successor, and B is on shard 1's stack.
  handle_table_access::set_depot_home_shard(1);
  allocate_until(1);
  allocate_until(0);
  release_until(1);
  handle_table_access::set_depot_home_shard(0);
  release_until(2);

  // P resumes: its exchange must fail (the head moved through four exchanges since it read
  // it) and it pops A afresh. Installing B as shard 0's top would put B on two stacks.
  s.resume.release();
  p_allocated.acquire();
  handle_table_access::set_depot_pop_hook(table, kind, nullptr, nullptr);
  CHECK(batches() == 1);  // B alone

  // M takes what the depot holds and refills once more (from the blocks): every live handle
  // is distinct.
  allocate_until(0);
  const std::size_t refill = handle_table_access::cached_free_slots(table, kind) + 1;
  for (std::size_t i = 0; i < refill; ++i) m_live.push_back(table.allocate(kind, &c));
  std::set<const void*> distinct{p_handle.address()};
  for (std::size_t i = oldest; i < m_live.size(); ++i) distinct.insert(m_live[i].address());
  CHECK(distinct.size() == m_live.size() - oldest + 1);

  p_finish.release();
  p.join();
  handle_table_access::set_depot_home_shard(-1);
  if (distinct.size() == m_live.size() - oldest + 1) {  // a slot handed out twice cannot be released twice
    while (oldest < m_live.size()) table.release(m_live[oldest++]);
  }
  CHECK(total(table.counters()) == 0);
}

namespace {

// The transit cases: thread T stalls holding a batch that is on no stack, in a return (put)
// or in a refill (take); meanwhile sweeps, iteration and counters run, and thread U allocates
// past the depot, releases, and exits.
void check_batch_in_transit(bool in_refill) {
  handle_table table;
  handle_table_access::use_depot(table, kind, 1, 64);
  std::vector<cell> cells(4000);
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i].alive = i % 5 != 0;
  // This thread's handles: what sweeps, iteration and counters must find, exactly.
  std::vector<handle> kept;
  for (std::size_t i = 0; i < 300; ++i) kept.push_back(table.allocate(kind, &cells[i]));
  std::set<const void*> in_transit;  // the slots T holds, free, in a batch on no stack
  std::vector<handle> t_live;        // handles T holds while it stalls

  // Releases hs in order until a release returns a batch to the depot. Before that release:
  // records the batch's slots (the oldest of the cache, when the cache is full) in
  // in_transit, the handles it will not release in `kept_back`, and arms the stall if
  // `stall_it`. (On a thread of its own: a doctest failure must not throw there.)
  const auto release_until_return = [&](const std::vector<handle>& hs, std::vector<handle>& kept_back, bool stall_it) {
    for (std::size_t i = 0; i < hs.size(); ++i) {
      const std::vector<const void*> cached = handle_table_access::cached_slots(table, kind);
      const bool returns = cached.size() == cache_capacity;
      if (returns) {
        in_transit.insert(cached.begin(), cached.begin() + batch);
        kept_back.assign(hs.begin() + static_cast<std::ptrdiff_t>(i) + 1, hs.end());
        stall_here = stall_it;
      }
      table.release(hs[i]);
      if (returns) return;
    }
  };

  stall_point s;
  handle_table_access::set_depot_transit_hook(table, kind, &stall_hook, &s);
  std::binary_semaphore t_finish{0};
  const void* t_slot = nullptr;  // in a refill: T's allocation after it resumed
  std::vector<handle> left;      // the helper's handles, released by this thread at the end
  std::binary_semaphore helper_returned{0}, helper_exit{0};
  std::thread t, helper;
  if (!in_refill) {
    // T allocates 512 and releases them in order until one release returns a batch: it
    // stalls there, holding the oldest 128 slots of its cache.
    t = std::thread([&] {
      std::vector<handle> hs;
      for (std::size_t i = 0; i < 4 * batch; ++i) hs.push_back(table.allocate(kind, &cells[1000 + i]));
      release_until_return(hs, t_live, true);  // stalls in the last release
      t_finish.acquire();
      for (handle h : t_live) table.release(h);
    });
  } else {
    // A helper returns one batch and waits (its other handles left to this thread; it stays,
    // so that its exit does not give the batch back to the blocks); T, its cache empty,
    // refills and stalls holding that batch.
    helper = std::thread([&] {
      std::vector<handle> hs;
      for (std::size_t i = 0; i < 4 * batch; ++i) hs.push_back(table.allocate(kind, &cells[1000 + i]));
      release_until_return(hs, left, false);
      helper_returned.release();
      helper_exit.acquire();
    });
    helper_returned.acquire();
    REQUIRE(handle_table_access::depot_full_batches(table, kind) == 1);
    t = std::thread([&] {
      stall_here = true;
      handle h = table.allocate(kind, &cells[2000]);  // stalls in the refill
      t_slot = h.address();
      t_finish.acquire();
      table.release(h);
    });
  }
  s.paused.acquire();
  REQUIRE(in_transit.size() == batch);  // (and the stall came from a return or refill of one)
  // With T stalled, the live handles are this thread's, T's and the helper's left ones.
  std::vector<handle> live = kept;
  live.insert(live.end(), t_live.begin(), t_live.end());
  live.insert(live.end(), left.begin(), left.end());
  std::size_t dead = 0;
  for (handle h : live) dead += !static_cast<cell*>(handle_table::target(h))->alive;
  const auto alive = [](void* t) { return static_cast<cell*>(t)->alive; };

  // Sweeps clear only live handles' dead targets; iteration and counters see exactly the live
  // handles, and none of the slots in transit.
  CHECK(table.sweep_weak(kind, alive) == dead);
  std::size_t visited = 0, visited_in_transit = 0;
  table.for_each_slot(kind, [&](handle_slot slot) {
    ++visited;
    visited_in_transit += in_transit.count(slot.as_handle().address());
  });
  CHECK(visited == live.size());
  CHECK(visited_in_transit == 0);
  CHECK(table.counters().handles[static_cast<std::size_t>(kind)] == live.size());

  // U allocates well past the depot (the table grows), releases, and exits with a full cache:
  // none of the slots in transit reaches it.
  std::size_t u_got_in_transit = 0;
  std::thread([&] {
    std::vector<handle> hs;
    for (std::size_t i = 0; i < 900; ++i) {
      hs.push_back(table.allocate(kind, &cells[2100 + i]));
      u_got_in_transit += in_transit.count(hs.back().address());
    }
    for (handle h : hs) table.release(h);
  }).join();
  CHECK(u_got_in_transit == 0);
  CHECK(table.counters().handles[static_cast<std::size_t>(kind)] == live.size());
  CHECK(table.sweep_weak(kind, alive) == 0);  // cleared before; nothing new to clear

  // T resumes and finishes; in a refill, its handle comes from the batch it held.
  s.resume.release();
  handle_table_access::set_depot_transit_hook(table, kind, nullptr, nullptr);
  t_finish.release();
  t.join();
  if (helper.joinable()) {
    helper_exit.release();
    helper.join();
  }
  if (in_refill) CHECK(in_transit.count(t_slot) == 1);
  for (handle h : kept) table.release(h);
  for (handle h : left) table.release(h);
  // T, U and the helper are gone (their caches returned); this thread's cache is its own to
  // allocate from.
  check_every_slot_allocatable(table);
}

}  // namespace

TEST_CASE("handle depot: a thread stalled returning a batch keeps its slots out of sweeps, iteration, counters "
          "and other threads' hands, across another thread's exit") {
  check_batch_in_transit(false);
}

TEST_CASE("handle depot: a thread stalled refilling a batch keeps its slots out of sweeps, iteration, counters "
          "and other threads' hands, across another thread's exit") {
  check_batch_in_transit(true);
}

TEST_CASE("handle depot: a table's depot has a shard per online CPU id, and room for 8 batches per shard, even "
          "when the thread that made the table is pinned to one CPU") {
  const std::size_t cpus = static_cast<std::size_t>(palrt::pal::cpu_id_bound());
  const auto check_sized = [&](handle_table& table) {
    for (handle_kind k :
         {handle_kind::strong, handle_kind::weak_short, handle_kind::weak_long, handle_kind::dependent}) {
      CHECK(handle_table_access::depot_shards(table, k) == std::min<std::size_t>(std::bit_ceil(cpus), 64));
      CHECK(handle_table_access::depot_capacity(table, k) >= 8 * handle_table_access::depot_shards(table, k));
    }
  };
  handle_table table;
  check_sized(table);
  // Made, and first used, by a thread pinned to its lowest CPU (a host that pins its main
  // thread): the other CPUs' threads still get shards of their own.
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int lowest = 0;
  while (!CPU_ISSET(lowest, &saved)) ++lowest;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(lowest, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);  // (no REQUIRE off the test's thread)
    handle_table pinned;
    cell c;
    std::vector<handle> hs;
    for (std::size_t i = 0; i < cache_capacity + 2 * batch; ++i) hs.push_back(pinned.allocate(kind, &c));
    for (handle h : hs) pinned.release(h);  // the first returns to the depot decide its shards
    check_sized(pinned);
  }).join();
}

TEST_CASE("handle depot: returns beyond the depot's room go back to the blocks, and every slot is allocatable again") {
  handle_table table;
  handle_table_access::use_depot(table, kind, 1, 8);
  REQUIRE(handle_table_access::depot_capacity(table, kind) == 8);
  cell c;
  std::thread([&] {
    // 12 returns past the cache: 8 fill the depot, 4 clear their bits instead.
    std::vector<handle> hs;
    for (std::size_t i = 0; i < cache_capacity + 12 * batch; ++i) hs.push_back(table.allocate(kind, &c));
    for (handle h : hs) table.release(h);
    CHECK(handle_table_access::depot_full_batches(table, kind) == 8);
  }).join();
  // The thread's exit gave the 8 batches it left back to the blocks, with its cache.
  CHECK(handle_table_access::depot_full_batches(table, kind) == 0);
  std::thread([&] { check_every_slot_allocatable(table); }).join();
}

TEST_CASE("handle depot: a return on a shard with no spare container makes a chunk for it before it takes another "
          "shard's spare, and takes one when no more may be made") {
  // A chunk's containers lie side by side: one that another CPU's thread fills and empties
  // beside this CPU's costs line transfers on every burst (batch_depot.cpp, put()).
  for (const std::size_t max_batches : {std::size_t{24}, std::size_t{8}}) {
    CAPTURE(max_batches);
    handle_table table;
    handle_table_access::use_depot(table, kind, 2, max_batches);  // chunks of 8, then 16
    cell c;
    std::thread([&] {
      std::vector<handle> hs;
      for (std::size_t i = 0; i < cache_capacity + 2 * batch; ++i) hs.push_back(table.allocate(kind, &c));
      // On shard 0 until the cache is full again after its first return: one batch went to
      // shard 0 in the chunk made for it, whose 7 other containers wait on shard 0.
      handle_table_access::set_depot_home_shard(0);
      std::size_t released = 0;
      while (handle_table_access::depot_full_batches(table, kind) == 0) table.release(hs.at(released++));
      while (handle_table_access::cached_free_slots(table, kind) < cache_capacity) table.release(hs.at(released++));
      CHECK(handle_table_access::depot_containers(table, kind) == 8);
      CHECK(handle_table_access::depot_full_batches(table, kind, 0) == 1);
      // The next on shard 1: a batch there, in a container of a chunk made for it while one
      // may be made, else in shard 0's spare (never back to the blocks).
      handle_table_access::set_depot_home_shard(1);
      table.release(hs.at(released++));
      CHECK(handle_table_access::depot_containers(table, kind) == (max_batches == 24 ? 24u : 8u));
      CHECK(handle_table_access::depot_full_batches(table, kind, 1) == 1);
      CHECK(handle_table_access::depot_full_batches(table, kind, 0) == 1);
      while (released < hs.size()) table.release(hs[released++]);
      handle_table_access::set_depot_home_shard(-1);
    }).join();
    // The thread's exit gave its cache and the batches it left back to the blocks.
    CHECK(handle_table_access::depot_full_batches(table, kind) == 0);
    std::thread([&] { check_every_slot_allocatable(table); }).join();
  }
}

TEST_CASE("handle depot: a thread that never overflowed its cache leaves the batches another CPU's thread parked; "
          "once it has, it takes them before growing the table; an exiting thread gives back the batches it left") {
  // P (shard 0) parks batches and waits. Q (shard 1), still growing its working set, must
  // not take them (its slots would sit beside P's in the same lines: batch_depot::take); once
  // Q has overflowed, it takes them rather than grow. P's exit then gives what is left on its
  // shard back to the blocks, and leaves Q's shard alone.
  handle_table table;
  handle_table_access::use_depot(table, kind, 2, 16);
  cell c;
  std::set<const void*> p_slots;  // every slot P allocated (written before p_parked)
  std::binary_semaphore p_parked{0}, p_exit{0}, q_done{0}, q_exit{0};
  std::thread p([&] {
    handle_table_access::set_depot_home_shard(0);
    std::vector<handle> hs;
    for (std::size_t i = 0; i < cache_capacity + 4 * batch; ++i) {
      hs.push_back(table.allocate(kind, &c));
      p_slots.insert(hs.back().address());
    }
    for (handle h : hs) table.release(h);  // the cache fills, then 4 or 5 batches go to shard 0
    p_parked.release();
    p_exit.acquire();
  });
  p_parked.acquire();
  const std::size_t parked = handle_table_access::depot_full_batches(table, kind, 0);
  REQUIRE(parked >= 4);

  struct phase {
    std::size_t from_p = 0;  // slots of P's the phase's allocations got
    std::size_t blocks_before = 0, blocks_after = 0;
    std::size_t parked_after = 0;  // full batches on shard 0 after the phase
  } growing, overflowed;
  std::size_t q_parked = 0;  // full batches on shard 1 when Q is done
  const auto allocate_n = [&](phase& ph, std::size_t n, std::vector<handle>& hs) {
    ph.blocks_before = table.counters().blocks;
    for (std::size_t i = 0; i < n; ++i) {
      hs.push_back(table.allocate(kind, &c));
      ph.from_p += p_slots.count(hs.back().address());
    }
    ph.blocks_after = table.counters().blocks;
    ph.parked_after = handle_table_access::depot_full_batches(table, kind, 0);  // P waits, Q is here
  };
  std::thread q([&] {
    handle_table_access::set_depot_home_shard(1);
    std::vector<handle> hs;
    allocate_n(growing, 3 * batch, hs);
    // 384 releases: the cache fills and overflows (batches to shard 1).
    for (handle h : hs) table.release(h);
    hs.clear();
    // Its cache and its own batches, then some of P's rather than new blocks.
    allocate_n(overflowed, cache_capacity + 4 * batch, hs);
    for (handle h : hs) table.release(h);  // the cache fills, batches to shard 1
    q_parked = handle_table_access::depot_full_batches(table, kind, 1);
    q_done.release();
    q_exit.acquire();
  });
  q_done.acquire();
  CHECK(growing.from_p == 0);
  CHECK(growing.parked_after == parked);
  CHECK(growing.blocks_after > growing.blocks_before);  // it grew the table instead
  CHECK(overflowed.from_p > 0);
  CHECK(overflowed.parked_after < parked);
  CHECK(overflowed.blocks_after == overflowed.blocks_before);
  CHECK(q_parked >= 1);

  p_exit.release();
  p.join();
  // P put to shard 0 last: its exit gave the batches left there back to the blocks. Shard 1
  // is Q's: untouched.
  CHECK(handle_table_access::depot_full_batches(table, kind, 0) == 0);
  CHECK(handle_table_access::depot_full_batches(table, kind, 1) == q_parked);
  q_exit.release();
  q.join();
  CHECK(handle_table_access::depot_full_batches(table, kind) == 0);
  // A new thread on either shard reaches every slot without growing the table.
  std::thread([&] {
    handle_table_access::set_depot_home_shard(0);
    check_every_slot_allocatable(table);
  }).join();
}

TEST_CASE("handle depot: a thread that only allocates, beside one that releases what it allocated, takes the "
          "releaser's batches once it has refilled from the blocks as often as the depot holds batches") {
  // A (shard 0) allocates and never releases; R (shard 1) releases A's handles and parks them.
  // A's cache never overflows, so only its refills from the blocks let it take from shard 1:
  // without that it would grow the table beside R's batches for as long as the two run.
  handle_table table;
  handle_table_access::use_depot(table, kind, 2, 8);
  const std::size_t max_batches = handle_table_access::depot_capacity(table, kind);
  REQUIRE(max_batches == 8);
  cell c;
  std::vector<handle> first;  // A's first allocations, released by R
  std::set<const void*> first_slots;
  std::binary_semaphore a_allocated{0}, r_released{0}, a_done{0};
  std::size_t from_r = 0, grown = 0;  // A's second round: R's slots it got, blocks added
  std::thread a([&] {
    handle_table_access::set_depot_home_shard(0);
    // 7 refills from the blocks (120 slots each, a new block each).
    for (std::size_t i = 0; i < cache_capacity + 4 * batch; ++i) {
      first.push_back(table.allocate(kind, &c));
      first_slots.insert(first.back().address());
    }
    a_allocated.release();
    r_released.acquire();
    // As many again: the rest of its cache, an 8th refill from the blocks (a new block), then
    // R's 4 batches, then the blocks again. Without taking R's batches: 6 new blocks.
    const std::size_t blocks_before = table.counters().blocks;
    std::vector<handle> second;
    for (std::size_t i = 0; i < cache_capacity + 4 * batch; ++i) {
      second.push_back(table.allocate(kind, &c));
      from_r += first_slots.count(second.back().address());
    }
    grown = table.counters().blocks - blocks_before;
    a_done.release();
    r_released.acquire();  // R has exited: A's handles go back now
    for (handle h : second) table.release(h);
  });
  std::thread r([&] {
    handle_table_access::set_depot_home_shard(1);
    a_allocated.acquire();
    for (handle h : first) table.release(h);  // its cache fills, then 4 batches to shard 1
    r_released.release();
    a_done.acquire();
  });
  r.join();
  r_released.release();
  a.join();
  CHECK(from_r == 4 * batch);  // every batch R parked (its cache's 256 stay its own until it exits)
  CHECK(grown <= 2);
  CHECK(total(table.counters()) == 0);
  std::thread([&] { check_every_slot_allocatable(table); }).join();
}

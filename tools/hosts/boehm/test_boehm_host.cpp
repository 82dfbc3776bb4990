// SPDX-License-Identifier: MIT
// The Boehm host's suite: palrt's handle table (all four kinds), identity cache and finalizer
// thread inside a real Boehm-collected process (libgc 8.2), wired by palrt::boehm::
// collector_binding, and checked against Boehm's own disappearing links as the oracle:
//   weak-short  == a short link (GC_general_register_disappearing_link) on the same object
//   weak-long   == a long link (GC_register_long_link)
//   dependent   == a long link on the primary, and while the primary lives its secondary and
//                  what the secondary points to are intact
//   strong      its object is never reclaimed (a long link on it is never cleared)
// with finalizers that resurrect their objects (from palrt's finalizer thread, through new
// strong handles), finalizers that keep dependent primaries alive, secondaries that hold
// pointers, collections at random points of every thread (so while others are inside
// allocate and release) and heap churn that hands reclaimed cells to new owners. The
// comparisons run under Boehm's lock, where no collection is in progress. Bounded by
// iterations; every count of what disagreed is reported.
//
// One process, one binding (Boehm's hooks are process-wide): main() makes the host and runs
// the cases; `--child=NAME` runs a failure path in a process of its own.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <pthread.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host_objects.hpp"
#include "palrt/boehm/collector_binding.hpp"
#include "palrt/boehm/thread_registration.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"

using namespace palrt;
using boehm_host::cell;
using boehm_host::intact;
using gc::handle;
using gc::handle_kind;

namespace {

// The suite's own collection event callback, set before the binding (which calls it first at
// every event). A test arms `window_probe` to run once at the next GC_EVENT_RECLAIM_START:
// the world runs again, the binding closed the gate at MARK_END, and no weak handle has been
// swept yet (the binding sweeps weak-short handles right after this, the others at
// RECLAIM_END): the window a mutator must not see dead objects through.
std::atomic<void (*)(void*)> window_probe{nullptr};
std::atomic<void*> window_probe_context{nullptr};
void GC_CALLBACK suite_events(GC_EventType event) {
  if (event != GC_EVENT_RECLAIM_START) return;
  void* context = window_probe_context.load(std::memory_order_acquire);
  if (auto probe = window_probe.exchange(nullptr, std::memory_order_acq_rel)) probe(context);
}

// The process's host: the table, the binding, palrt's finalizer thread serving Boehm's queue.
struct host {
  gc::handle_table table{gc::handle_table_options{.index_dependents = true}};
  boehm::collector_binding binding{table};
  gc::finalizer_thread finalizer{boehm::collector_binding::finalization_source()};
  // Strong handles made by resurrecting finalizers (they run on the finalizer thread).
  std::mutex keepers_lock;
  std::vector<handle> keepers;
  std::atomic<std::uint64_t> finalized{0}, resurrected{0}, finalized_unregistered{0}, finalized_on_main{0};
  pthread_t main_thread = pthread_self();

  host() {
    finalizer.start();
    binding.serve_finalizers(finalizer);
  }
  ~host() {
    binding.stop_serving_finalizers();
    (void)finalizer.stop();
  }
  // Releases the handles resurrecting finalizers made; returns how many.
  std::size_t release_keepers() {
    std::vector<handle> taken;
    {
      std::lock_guard guard(keepers_lock);
      taken.swap(keepers);
    }
    for (handle h : taken) table.release(h);
    return taken.size();
  }
  // Until nothing is left to finalize or resurrect (a finalizer runs once per registration):
  // false if the finalizer thread did not finish what was ready.
  bool settle() {
    bool finished = true;
    for (int round = 0; round < 4; ++round) {
      GC_gcollect();
      finished &= finalizer.wait_for_pending_finalizers(std::chrono::seconds(60)) == gc::pending_finalizers::finalized;
      release_keepers();
    }
    return finished;
  }
};
host* the_host = nullptr;

// Finalizer data: whether the finalizer resurrects its object (resurrect_flag, not the
// object's address: Boehm keeps a finalizer's data reachable, so that would keep the object).
void* const resurrect_flag = reinterpret_cast<void*>(1);
void GC_CALLBACK finalize_cell(void* object, void* resurrect) {
  host& h = *the_host;
  h.finalized.fetch_add(1, std::memory_order_relaxed);
  if (!GC_thread_is_registered()) h.finalized_unregistered.fetch_add(1, std::memory_order_relaxed);
  if (pthread_equal(pthread_self(), h.main_thread)) h.finalized_on_main.fetch_add(1, std::memory_order_relaxed);
  if (resurrect) {
    handle keeper = h.table.allocate(handle_kind::strong, object);
    std::lock_guard guard(h.keepers_lock);
    h.keepers.push_back(keeper);
    h.resurrected.fetch_add(1, std::memory_order_relaxed);
  }
}

enum class entry_kind { strong, weak_short, weak_long, dependent };

// One object the stress tracks, its palrt handles and the oracle's links. In malloc memory
// (std::deque of unique_ptr): Boehm does not scan it, so nothing here keeps an object alive
// but the strong handles.
struct entry {
  entry_kind kind;
  std::uint64_t id;
  std::uint64_t secondary_id = 0, child_id = 0;  // dependent: what the secondary must be
  handle h;                                      // of `kind`
  handle short_handle;                           // weak-long and weak-short entries: a weak-short handle too
  handle keeper;                                 // a strong handle that keeps the object for a while (weak kinds)
  void* short_link = nullptr;
  void* long_link = nullptr;
};

struct tally {
  std::uint64_t checked = 0;
  std::uint64_t lost = 0;     // palrt's handle null, the oracle's link set
  std::uint64_t stale = 0;    // palrt's handle set, the oracle's link cleared (a dead object)
  std::uint64_t corrupt = 0;  // an object palrt yields whose canary is wrong (reclaimed)
  std::uint64_t wrong_secondary = 0;
  std::uint64_t strong_lost = 0;
  void add(const tally& t) {
    checked += t.checked;
    lost += t.lost;
    stale += t.stale;
    corrupt += t.corrupt;
    wrong_secondary += t.wrong_secondary;
    strong_lost += t.strong_lost;
  }
};

void compare(void* target, void* link, tally& t) {
  ++t.checked;
  if (!target && link) ++t.lost;
  if (target && !link) ++t.stale;
  if (target && target != link && link) ++t.stale;
  if (target && !intact(static_cast<cell*>(target))) ++t.corrupt;
}

struct check_context {
  std::deque<std::unique_ptr<entry>>* entries;
  tally* t;
};

// Under Boehm's lock: no collection is between its mark and its reclaim, the gate is open,
// and the links are stable.
void* GC_CALLBACK check_entries(void* context) {
  auto& c = *static_cast<check_context*>(context);
  gc::handle_table& table = the_host->table;
  for (auto& e : *c.entries) {
    switch (e->kind) {
      case entry_kind::strong: {
        void* target = table.target(e->h);
        ++c.t->checked;
        if (!e->long_link || target != e->long_link) ++c.t->strong_lost;
        if (!intact(static_cast<cell*>(target))) ++c.t->corrupt;
        break;
      }
      case entry_kind::weak_short: compare(table.gated_target(e->h), e->short_link, *c.t); break;
      case entry_kind::weak_long:
        compare(table.gated_target(e->h), e->long_link, *c.t);
        compare(table.gated_target(e->short_handle), e->short_link, *c.t);
        break;
      case entry_kind::dependent: {
        void* primary = table.gated_target(e->h);
        compare(primary, e->long_link, *c.t);
        if (primary) {
          auto* s = static_cast<cell*>(table.gated_secondary(e->h));
          if (!s || !intact(s) || s->id != e->secondary_id || !intact(s->child) || s->child->id != e->child_id)
            ++c.t->wrong_secondary;
        }
        break;
      }
    }
  }
  return nullptr;
}

void drop(entry& e) {
  gc::handle_table& table = the_host->table;
  table.release(e.h);
  if (e.short_handle) table.release(e.short_handle);
  if (e.keeper) table.release(e.keeper);
  if (e.kind != entry_kind::strong && e.kind != entry_kind::dependent) GC_unregister_disappearing_link(&e.short_link);
  if (e.kind != entry_kind::weak_short) GC_unregister_long_link(&e.long_link);
}

// One stress thread: `ops` random operations over its own entries.
tally stress_thread(int thread_index, int ops, std::atomic<std::uint64_t>& ids) {
  boehm::scoped_thread_registration registration;
  gc::handle_table& table = the_host->table;
  std::deque<std::unique_ptr<entry>> entries;
  tally t;
  std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(thread_index));
  auto roll = [&](unsigned n) { return static_cast<unsigned>(rng() % n); };
  auto next_id = [&] { return ids.fetch_add(1, std::memory_order_relaxed); };
  for (int op = 0; op < ops; ++op) {
    const unsigned r = roll(1000);
    if (r < 400 && entries.size() < 400) {
      auto e = std::make_unique<entry>();
      e->kind = static_cast<entry_kind>(roll(4));
      e->id = next_id();
      switch (e->kind) {
        case entry_kind::strong: {
          cell* o = boehm_host::make_cell(e->id);
          e->h = table.allocate(handle_kind::strong, o);
          e->long_link = o;
          GC_register_long_link(&e->long_link, o);
          break;
        }
        case entry_kind::weak_short: {
          cell* o = boehm_host::make_cell(e->id);
          e->h = table.allocate(handle_kind::weak_short, o);
          if (roll(2)) e->keeper = table.allocate(handle_kind::strong, o);
          e->short_link = o;
          GC_general_register_disappearing_link(&e->short_link, o);
          break;
        }
        case entry_kind::weak_long: {
          cell* o = boehm_host::make_cell(e->id);
          GC_register_finalizer(o, finalize_cell, roll(2) ? resurrect_flag : nullptr, nullptr, nullptr);
          e->h = table.allocate(handle_kind::weak_long, o);
          e->short_handle = table.allocate(handle_kind::weak_short, o);
          if (roll(2)) e->keeper = table.allocate(handle_kind::strong, o);
          e->short_link = o;
          e->long_link = o;
          GC_general_register_disappearing_link(&e->short_link, o);
          GC_register_long_link(&e->long_link, o);
          break;
        }
        case entry_kind::dependent: {
          // The primary is traced (its marking traces its secondaries); its finalizer keeps
          // it alive half the time. The secondary holds a pointer to a child: only the
          // tracing of the secondary keeps the child.
          auto* p =
              boehm_host::make_cell_with([&](std::size_t n) { return the_host->binding.allocate_traced(n); }, e->id);
          GC_register_finalizer(p, finalize_cell, roll(2) ? resurrect_flag : nullptr, nullptr, nullptr);
          e->child_id = next_id();
          e->secondary_id = next_id();
          cell* s = boehm_host::make_cell(e->secondary_id, boehm_host::make_cell(e->child_id));
          e->h = table.allocate(handle_kind::dependent, p, s);
          if (roll(2)) e->keeper = table.allocate(handle_kind::strong, p);
          e->long_link = p;
          GC_register_long_link(&e->long_link, p);
          break;
        }
      }
      entries.push_back(std::move(e));
    } else if (r < 600 && !entries.empty()) {
      const std::size_t at = roll(static_cast<unsigned>(entries.size()));
      drop(*entries[at]);
      entries[at] = std::move(entries.back());
      entries.pop_back();
    } else if (r < 800 && !entries.empty()) {
      entry& e = *entries[roll(static_cast<unsigned>(entries.size()))];
      if (e.keeper) {
        table.release(e.keeper);
        e.keeper = {};
      }
    } else if (r < 806) {
      GC_gcollect();
    } else if (r < 990) {
      boehm_host::churn_heap(8);
    } else {
      check_context c{&entries, &t};
      GC_call_with_alloc_lock(check_entries, &c);
    }
  }
  check_context c{&entries, &t};
  GC_call_with_alloc_lock(check_entries, &c);
  for (auto& e : entries) drop(*e);
  return t;
}

void run_stress(int threads, int ops) {
  host& h = *the_host;
  const boehm::binding_counters before = h.binding.counters();
  const std::uint64_t finalized_before = h.finalized.load(), resurrected_before = h.resurrected.load();
  std::atomic<std::uint64_t> ids{1};
  std::vector<tally> tallies(static_cast<std::size_t>(threads));
  std::vector<std::thread> team;
  for (int i = 0; i < threads; ++i)
    team.emplace_back([&, i] { tallies[static_cast<std::size_t>(i)] = stress_thread(i, ops, ids); });
  for (auto& t : team) t.join();
  tally all;
  for (const tally& t : tallies) all.add(t);
  CHECK(h.settle());
  const boehm::binding_counters after = h.binding.counters();
  INFO(threads << " threads x " << ops << " ops: " << all.checked << " comparisons; lost " << all.lost << ", stale "
               << all.stale << ", corrupt " << all.corrupt << ", wrong secondaries " << all.wrong_secondary
               << ", strong lost " << all.strong_lost << "; collections " << after.collections - before.collections
               << ", cleared weak-short " << after.weak_short_cleared - before.weak_short_cleared << ", weak-long "
               << after.weak_long_cleared - before.weak_long_cleared << ", dependent "
               << after.dependent_cleared - before.dependent_cleared << "; finalized "
               << h.finalized.load() - finalized_before << ", resurrected "
               << h.resurrected.load() - resurrected_before);
  CHECK(all.lost == 0);
  CHECK(all.stale == 0);
  CHECK(all.corrupt == 0);
  CHECK(all.wrong_secondary == 0);
  CHECK(all.strong_lost == 0);
  // The run exercised what it claims.
  CHECK(all.checked > 1000);
  CHECK(after.collections - before.collections >= 10);
  CHECK(after.weak_short_cleared > before.weak_short_cleared);
  CHECK(after.weak_long_cleared > before.weak_long_cleared);
  CHECK(after.dependent_cleared > before.dependent_cleared);
  CHECK(h.finalized.load() > finalized_before);
  CHECK(h.resurrected.load() > resurrected_before);
  CHECK(h.finalized_unregistered.load() == 0);
  CHECK(h.finalized_on_main.load() == 0);
  // Everything the threads made was released.
  const gc::handle_counters c = h.table.counters();
  std::size_t live = 0;
  for (std::size_t n : c.handles) live += n;
  CHECK(live == 0);
}

}  // namespace

TEST_CASE("boehm host: every handle kind agrees with Boehm's own links, 4 threads") { run_stress(4, 30000); }

TEST_CASE("boehm host: every handle kind agrees with Boehm's own links, 8 threads") { run_stress(8, 15000); }

TEST_CASE("boehm host: a finalizer that keeps its primary alive keeps the secondary and what it points to") {
  // The failure before: Boehm marks what its finalization keeps alive with no hook to promote
  // dependents again, so the secondary was reclaimed while the handle still yielded the
  // primary (and a secondary's own pointers were never traced).
  host& h = *the_host;
  constexpr int n = 200;
  struct tracked {
    handle dep;
    void* link;
    std::uint64_t secondary_id, child_id;
  };
  auto tracked_list = std::make_unique<tracked[]>(n);
  {
    for (int i = 0; i < n; ++i) {
      auto* p = boehm_host::make_cell_with([&](std::size_t b) { return h.binding.allocate_traced(b); }, 1'000'000u + i);
      GC_register_finalizer(p, finalize_cell, resurrect_flag, nullptr, nullptr);
      cell* s = boehm_host::make_cell(2'000'000u + i, boehm_host::make_cell(3'000'000u + i));
      tracked_list[i] = {h.table.allocate(handle_kind::dependent, p, s), p, 2'000'000u + i, 3'000'000u + i};
      GC_register_long_link(&tracked_list[i].link, p);
    }
  }
  const std::uint64_t resurrected_before = h.resurrected.load();
  GC_gcollect();  // the primaries are unreachable: finalization marks them (and their secondaries)
  CHECK(h.finalizer.wait_for_pending_finalizers(std::chrono::seconds(60)) == gc::pending_finalizers::finalized);
  for (int round = 0; round < 3; ++round) {
    boehm_host::churn_heap(20000);
    GC_gcollect();
  }
  int alive = 0, wrong = 0;
  for (int i = 0; i < n; ++i) {
    void* p = h.table.gated_target(tracked_list[i].dep);
    if (!p) continue;
    ++alive;
    auto* s = static_cast<cell*>(h.table.gated_secondary(tracked_list[i].dep));
    if (!intact(s) || s->id != tracked_list[i].secondary_id || !intact(s->child) ||
        s->child->id != tracked_list[i].child_id)
      ++wrong;
  }
  INFO(alive << " primaries kept by their finalizers; " << wrong << " with a reclaimed secondary or child");
  CHECK(h.resurrected.load() - resurrected_before >= static_cast<std::uint64_t>(n / 2));
  CHECK(alive >= n / 2);
  CHECK(wrong == 0);
  for (int i = 0; i < n; ++i) {
    h.table.release(tracked_list[i].dep);
    GC_unregister_long_link(&tracked_list[i].link);
  }
  CHECK(h.settle());
}

TEST_CASE("boehm host: a weak read while a collection is between its mark and its reclaim never yields a dead object") {
  // Boehm restarts the world after its mark and clears weak-long references only after its
  // finalization: a raw read in that window returns an object Boehm has found dead and then
  // reclaims (before: 2000 of 2000 such reads). Through the gate the read waits for the
  // sweeps. A reader thread reads weak handles of dying objects without pause while this
  // thread collects. A read that began after the collection's mark ended (Boehm's collection
  // number had moved on) and returned an object is kept where Boehm sees it; the heap is
  // churned so that reclaimed cells get new owners, and every such object must still be
  // itself. Reads before the mark are not kept (they would keep their objects alive).
  host& h = *the_host;
  constexpr int per_round = 64, rounds = 150;
  struct shared {
    gc::handle hs[2 * per_round];
    std::uint64_t ids[per_round];
    std::atomic<int> round{0}, collected{0}, checked{0};
    std::atomic<GC_word> collections_before{0};
    std::atomic<std::uint64_t> dead_seen{0}, live_seen{0}, after_mark{0};
  } sh;
  std::thread reader([&] {
    boehm::scoped_thread_registration registration;
    auto** seen = static_cast<cell**>(GC_MALLOC(2 * per_round * sizeof(cell*)));
    for (int r = 1; r <= rounds; ++r) {
      while (sh.round.load(std::memory_order_acquire) < r) std::this_thread::yield();
      for (int i = 0; i < 2 * per_round; ++i) seen[i] = nullptr;
      const GC_word before = sh.collections_before.load(std::memory_order_acquire);
      std::uint64_t late = 0;
      do {
        for (int i = 0; i < 2 * per_round; ++i) {
          const GC_word collections = GC_get_gc_no();
          void* t = h.table.gated_target(sh.hs[i]);
          if (collections > before) {
            ++late;
            if (t) seen[i] = static_cast<cell*>(t);
          }
        }
      } while (sh.collected.load(std::memory_order_acquire) < r);
      sh.after_mark.fetch_add(late);
      boehm_host::churn_heap(4000);
      for (int i = 0; i < 2 * per_round; ++i) {
        if (!seen[i]) continue;
        if (!intact(seen[i]) || seen[i]->id != sh.ids[i % per_round])
          sh.dead_seen.fetch_add(1);
        else
          sh.live_seen.fetch_add(1);
      }
      sh.checked.store(r, std::memory_order_release);
    }
  });
  for (int r = 1; r <= rounds; ++r) {
    for (int i = 0; i < per_round; ++i) {
      sh.ids[i] = 70'000'000u + static_cast<std::uint64_t>(r) * per_round + i;
      cell* o = boehm_host::make_cell(sh.ids[i]);
      sh.hs[i] = h.table.allocate(handle_kind::weak_long, o);
      sh.hs[per_round + i] = h.table.allocate(handle_kind::weak_short, o);
    }
    sh.collections_before.store(GC_get_gc_no(), std::memory_order_release);
    sh.round.store(r, std::memory_order_release);
    GC_gcollect();
    sh.collected.store(r, std::memory_order_release);
    while (sh.checked.load(std::memory_order_acquire) < r) std::this_thread::yield();
    for (gc::handle& hd : sh.hs) h.table.release(hd);
  }
  reader.join();
  INFO(sh.after_mark.load() << " reads after a mark: " << sh.dead_seen.load() << " returned an object Boehm reclaimed, "
                            << sh.live_seen.load() << " a live one");
  CHECK(sh.dead_seen.load() == 0);
  CHECK(sh.after_mark.load() > 0);  // the window was read in
}

namespace {

// A handle to an object nothing else holds, with Boehm's own link on the object as the oracle
// (a short link for weak-short handles, a long one for the others: cleared when Boehm
// reclaims it). In malloc memory, which Boehm does not scan.
struct watched {
  handle h;
  void* link = nullptr;
  void* got = nullptr;  // what a read or release returned
};

// Made in a frame of their own, so that no stale word of the test's frame keeps one alive.
[[gnu::noinline]] void watch_garbage(watched* items, int n, handle_kind kind) {
  host& h = *the_host;
  for (int i = 0; i < n; ++i) {
    void* target;
    if (kind == handle_kind::dependent) {
      cell* p =
          boehm_host::make_cell_with([&](std::size_t b) { return h.binding.allocate_traced(b); }, 80'000'000u + i);
      items[i].h = h.table.allocate(kind, p, boehm_host::make_cell(81'000'000u + i));
      target = p;
    } else {
      target = boehm_host::make_cell(82'000'000u + i);
      items[i].h = h.table.allocate(kind, target);
    }
    items[i].link = target;
    if (kind == handle_kind::weak_short)
      GC_general_register_disappearing_link(&items[i].link, target);
    else
      GC_register_long_link(&items[i].link, target);
  }
}

void unwatch(watched* items, int n, handle_kind kind) {
  for (int i = 0; i < n; ++i) {
    if (kind == handle_kind::weak_short)
      GC_unregister_disappearing_link(&items[i].link);
    else
      GC_unregister_long_link(&items[i].link);
  }
}

}  // namespace

TEST_CASE("boehm host: a release between the mark and the sweeps waits for them and never returns a dead object") {
  // Before: release() returned the raw target, so a release in the window between Boehm's
  // mark and the binding's sweeps (the world runs then) returned an object Boehm had found
  // dead and then reclaimed. Forced: at RECLAIM_START (the suite's event callback, which the
  // binding calls first) a mutator is let go to release handles to garbage of each kind, and
  // the collection goes on only once the mutator waits in the gate, or has released them all.
  // The control: a raw target() of the weak-short handles there returns their dead objects,
  // which is why the binding's header has every weak read go through the gate.
  host& h = *the_host;
  constexpr int n = 100;
  const handle_kind kinds[] = {handle_kind::weak_short, handle_kind::weak_long, handle_kind::dependent};
  auto items = std::make_unique<watched[]>(3 * n);
  auto raw = std::make_unique<void*[]>(n);
  // No collection until the probe is armed (one would clear some handles before the window).
  GC_disable();
  for (int k = 0; k < 3; ++k) watch_garbage(&items[k * n], n, kinds[k]);
  struct probe_state {
    watched* items;
    void** raw;
    std::atomic<bool> registered{false}, go{false}, ran{false};
    std::atomic<int> released{0};
    int released_in_window = -1;
  } ps{items.get(), raw.get()};
  std::thread mutator([&] {
    boehm::scoped_thread_registration registration;  // takes Boehm's lock: before the collection
    ps.registered.store(true, std::memory_order_release);
    while (!ps.go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (int i = 0; i < 3 * n; ++i) {
      ps.items[i].got = h.table.release(ps.items[i].h);
      ps.released.fetch_add(1, std::memory_order_release);
    }
  });
  while (!ps.registered.load(std::memory_order_acquire)) std::this_thread::yield();
  window_probe_context.store(&ps, std::memory_order_release);
  window_probe.store(
      [](void* p) {
        auto& st = *static_cast<probe_state*>(p);
        gc::handle_table& table = the_host->table;
        for (int i = 0; i < n; ++i) st.raw[i] = gc::handle_table::target(st.items[i].h);  // weak-short: the control
        st.go.store(true, std::memory_order_release);
        while (st.released.load(std::memory_order_acquire) < 3 * n &&
               gc::internal::handle_table_access::gate_waiters(table) == 0)
          std::this_thread::yield();
        st.released_in_window = st.released.load(std::memory_order_acquire);
        st.ran.store(true, std::memory_order_release);
      },
      std::memory_order_release);
  GC_enable();
  for (int round = 0; round < 3 && !ps.ran.load(std::memory_order_acquire); ++round) GC_gcollect();
  window_probe.store(nullptr);
  if (!ps.go.load()) ps.go.store(true);  // (the probe never ran: the checks below say so)
  mutator.join();
  int dead = 0, stale = 0, raw_dead = 0;
  for (int i = 0; i < 3 * n; ++i) {
    if (items[i].link) continue;  // Boehm kept it (a stale word somewhere): nothing to compare
    ++dead;
    if (items[i].got) ++stale;
    if (i < n && raw[i]) ++raw_dead;
  }
  INFO(dead << " of " << 3 * n << " objects died in the collection; released in the window before the sweeps: "
            << ps.released_in_window << "; releases that returned a dead object: " << stale
            << "; raw weak-short reads in the window that returned one (the control): " << raw_dead);
  CHECK(ps.ran.load());
  CHECK(dead >= 3 * n / 2);
  CHECK(ps.released_in_window == 0);
  CHECK(stale == 0);
  CHECK(raw_dead > 0);
  for (int k = 0; k < 3; ++k) unwatch(&items[k * n], n, kinds[k]);
}

TEST_CASE("boehm host: a dependent handle whose primary died yields no secondary, through any read") {
  // Before: once the binding's sweep had cleared a dead primary, secondary() and
  // handle_slot::secondary() still returned the dead secondary (2000 of 2000, most of them
  // cells Boehm had handed to new owners); gated_secondary() was right.
  host& h = *the_host;
  constexpr int n = 2000;
  auto items = std::make_unique<watched[]>(n);
  watch_garbage(items.get(), n, handle_kind::dependent);
  for (int round = 0; round < 2; ++round) {
    GC_gcollect();
    boehm_host::churn_heap(20000);  // the dead secondaries' cells get new owners
  }
  int cleared = 0, stale = 0, stale_gated = 0, stale_slots = 0;
  for (int i = 0; i < n; ++i) {
    if (h.table.gated_target(items[i].h)) continue;
    ++cleared;
    stale += h.table.secondary(items[i].h) != nullptr;
    stale_gated += h.table.gated_secondary(items[i].h) != nullptr;
  }
  // The slot walk a moving collector would make (under Boehm's lock: no sweep runs meanwhile).
  struct walk {
    gc::handle_table* table;
    int* stale;
  } w{&h.table, &stale_slots};
  GC_call_with_alloc_lock(
      [](void* p) -> void* {
        auto& wk = *static_cast<walk*>(p);
        wk.table->for_each_slot(handle_kind::dependent, [&](gc::handle_slot slot) {
          if (!slot.target()) *wk.stale += slot.secondary() != nullptr;
        });
        return nullptr;
      },
      &w);
  INFO(cleared << " of " << n << " primaries cleared; secondaries still yielded by secondary(): " << stale
               << ", gated_secondary(): " << stale_gated << ", handle_slot::secondary(): " << stale_slots);
  CHECK(cleared >= n / 2);
  CHECK(stale == 0);
  CHECK(stale_gated == 0);
  CHECK(stale_slots == 0);
  for (int i = 0; i < n; ++i) h.table.release(items[i].h);
  unwatch(items.get(), n, handle_kind::dependent);
}

TEST_CASE("boehm host: the identity cache keeps identity for held wrappers and forgets dead ones at the mark") {
  host& h = *the_host;
  boehm::identity_cache cache;
  h.binding.add_cache(cache);
  constexpr int natives_count = 256, threads = 4;
  std::vector<int> natives(natives_count);
  // The wrappers each thread holds, where Boehm sees them: a GC_MALLOC'd array per thread, all
  // of them in one array this thread's stack holds (so they outlive the threads).
  std::vector<std::uint64_t> bad(threads, 0);
  auto** held = static_cast<cell***>(GC_MALLOC(threads * sizeof(cell**)));
  REQUIRE(held);
  std::atomic<std::uint64_t> ids{10'000'000};
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      boehm::scoped_thread_registration registration;
      auto** mine = static_cast<cell**>(GC_MALLOC(natives_count * sizeof(cell*)));
      held[t] = mine;
      std::mt19937 rng(77u + static_cast<unsigned>(t));
      for (int op = 0; op < 20000; ++op) {
        const int i = static_cast<int>(rng() % natives_count);
        const void* native = &natives[static_cast<std::size_t>(i)];
        if (rng() % 4 == 0) {
          mine[i] = nullptr;  // dropped: collectible unless another thread holds it
          continue;
        }
        auto e = cache.get_or_create(native, [&](const void* id) -> void* {
          cell* w = boehm_host::make_cell(ids.fetch_add(1));
          w->native = id;
          return w;
        });
        auto* w = static_cast<cell*>(e.wrapper);
        if (!intact(w) || w->native != native) ++bad[static_cast<std::size_t>(t)];
        if (mine[i] && mine[i] != w) ++bad[static_cast<std::size_t>(t)];  // held, so it must be the one
        mine[i] = w;
        if (op % 500 == 0) GC_gcollect();
        if (op % 50 == 0) boehm_host::churn_heap(16);
      }
    });
  }
  for (auto& t : team) t.join();
  std::uint64_t wrong = 0;
  for (auto b : bad) wrong += b;
  // Identity across threads: every wrapper held for a native is the same one.
  std::uint64_t split = 0;
  for (int i = 0; i < natives_count; ++i) {
    cell* first = nullptr;
    for (int t = 0; t < threads; ++t) {
      cell* w = held[t][i];
      if (!w) continue;
      if (!first)
        first = w;
      else if (w != first)
        ++split;
    }
  }
  const auto swept_before = h.binding.counters().cache_entries_swept;
  for (int t = 0; t < threads; ++t) held[t] = nullptr;  // all dropped now
  for (int round = 0; round < 3; ++round) {
    boehm_host::churn_heap(20000);
    GC_gcollect();
  }
  const auto swept = h.binding.counters().cache_entries_swept - swept_before;
  INFO(wrong << " wrong wrappers handed out, " << split << " natives with two held wrappers; " << swept
             << " entries swept after every wrapper was dropped; cache: " << cache.counters().inserted << " inserted");
  CHECK(wrong == 0);
  CHECK(split == 0);
  // Conservative scanning may keep a few wrappers (a stale word on a stack): most go.
  CHECK(swept >= natives_count / 2);
  h.binding.remove_cache(cache);
}

TEST_CASE("boehm host: Boehm's finalizers run on palrt's finalizer thread, registered with Boehm") {
  host& h = *the_host;
  const std::uint64_t before = h.finalized.load();
  for (int i = 0; i < 100; ++i)
    GC_register_finalizer(boehm_host::make_cell(50'000'000u + i), finalize_cell, nullptr, nullptr, nullptr);
  boehm_host::churn_heap(1000);
  GC_gcollect();
  CHECK(h.finalizer.wait_for_pending_finalizers(std::chrono::seconds(60)) == gc::pending_finalizers::finalized);
  CHECK(h.finalized.load() - before >= 50);  // a few may be kept by a stale stack word
  CHECK(h.finalized_on_main.load() == 0);
  CHECK(h.finalized_unregistered.load() == 0);
  CHECK(h.binding.counters().finalizer_notifications > 0);
}

TEST_CASE("boehm host: a second binding, and a traced object from a table without the index, are refused") {
  host& h = *the_host;
  gc::handle_table other;
  CHECK_THROWS_WITH_AS(boehm::collector_binding{other}, doctest::Contains("a binding exists already (one per process"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(boehm::collector_binding{h.table}, doctest::Contains("a binding exists already"),
                       std::logic_error);
  // The check for the index is the binding's own (its table is indexed): asked in a child.
}

// --- Failure paths in a process of their own (./palrt-boehm-host-tests --child=NAME) ---

namespace {

[[gnu::noinline]] handle make_weak_to_garbage(gc::handle_table& table) {
  return table.allocate(handle_kind::weak_short, boehm_host::make_cell(90'000'000u));
}

int child(const std::string& name) {
  GC_INIT();
  if (name == "incremental") {
    GC_enable_incremental();
    gc::handle_table table;
    try {
      boehm::collector_binding binding(table);
    } catch (const std::logic_error& e) {
      std::printf("refused: %s\n", e.what());
      return 0;
    }
    std::printf("accepted\n");
    return 1;
  }
  if (name == "unindexed") {
    gc::handle_table table;
    boehm::collector_binding binding(table);
    try {
      (void)binding.allocate_traced(32);
    } catch (const std::logic_error& e) {
      std::printf("refused: %s\n", e.what());
      return 0;
    }
    std::printf("accepted\n");
    return 1;
  }
  if (name == "claimed") {
    gc::handle_table table;
    int other_collector = 0;
    table.claim_for_collector(&other_collector);
    try {
      boehm::collector_binding binding(table);
    } catch (const std::logic_error& e) {
      // Nothing was installed: a binding for another table works after.
      gc::handle_table second;
      boehm::collector_binding binding(second);
      std::printf("refused: %s\n", e.what());
      return 0;
    }
    std::printf("accepted\n");
    return 1;
  }
  if (name == "event-replaced" || name == "event-chained") {
    // A host sets its own collection event callback after the binding: replacing the
    // binding's, or calling it on. A weak handle to garbage must be cleared (chained) or the
    // collection stopped before it reclaims anything (replaced).
    gc::handle_table table;
    boehm::collector_binding binding(table);
    static GC_on_collection_event_proc replaced = nullptr;
    static int events = 0;
    replaced = GC_get_on_collection_event();
    if (name == "event-replaced")
      GC_set_on_collection_event([](GC_EventType) { ++events; });
    else
      GC_set_on_collection_event([](GC_EventType e) {
        ++events;
        replaced(e);
      });
    handle weak = make_weak_to_garbage(table);
    for (int i = 0; i < 5 && table.gated_target(weak); ++i) GC_gcollect();
    const bool cleared = !table.gated_target(weak);
    std::printf("%s after %d events: the weak handle was %s\n", name.c_str(), events,
                cleared ? "cleared" : "not cleared");
    table.release(weak);
    return cleared ? 0 : 1;
  }
  std::fprintf(stderr, "unknown child %s\n", name.c_str());
  return 2;
}

std::string self_path;

std::string run_child(const std::string& name, int& status) {
  const std::string command = "'" + self_path + "' --child=" + name + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  status = pclose(p);
  return out;
}

}  // namespace

TEST_CASE("boehm host: the binding refuses incremental mode, an unindexed table's traced objects, a claimed table") {
  struct expectation {
    const char* name;
    const char* message;
  };
  for (const expectation e : {expectation{"incremental", "Boehm runs in incremental mode"},
                              expectation{"unindexed", "was not made with index_dependents"},
                              expectation{"claimed", "already swept by another collector"}}) {
    CAPTURE(e.name);
    int status = -1;
    const std::string out = run_child(e.name, status);
    CAPTURE(out);
    CHECK(status == 0);
    CHECK(out.find(std::string("refused: palrt: ")) != std::string::npos);
    CHECK(out.find(e.message) != std::string::npos);
  }
}

TEST_CASE("boehm host: a collection event callback set after the binding must call it on, or the process stops") {
  // Before: a GC_set_on_collection_event() made after the binding silently disabled it (no
  // sweep ran, so every weak handle dangled: the child's weak handle kept its reclaimed
  // object). Now the binding's root push finds that its callback missed the mark's start and
  // aborts with one line, before Boehm reclaims anything; a callback that calls it on works.
  int status = -1;
  std::string out = run_child("event-replaced", status);
  CAPTURE(out);
  const bool aborted = (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) ||
                       (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGABRT);  // through sh -c
  CHECK(aborted);
  CHECK(out.find("palrt: boehm::collector_binding: a collection is marking without the binding's collection event "
                 "callback (GC_set_on_collection_event() was called after the binding") != std::string::npos);
  CHECK(out.find("the weak handle was") == std::string::npos);  // it stopped at the first collection
  out = run_child("event-chained", status);
  CAPTURE(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out.find("event-chained after ") != std::string::npos);
  CHECK(out.find("the weak handle was cleared") != std::string::npos);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--child=", 8) == 0) return child(argv[i] + 8);
  self_path = argv[0];
  if (self_path.find('/') == std::string::npos) self_path = "./" + self_path;
  GC_INIT();
  GC_set_on_collection_event(suite_events);  // before the binding, which calls it first
  int result;
  {
    host h;
    the_host = &h;
    doctest::Context context(argc, argv);
    result = context.run();
    if (!h.settle()) {
      std::fprintf(stderr, "palrt-boehm-host-tests: finalizers left unfinished at exit\n");
      result = 1;
    }
    the_host = nullptr;
  }
  return result;
}

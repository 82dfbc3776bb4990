// SPDX-License-Identifier: MIT
// Dependent handles by primary (handle_table_options::index_dependents), for a collector with
// no "promote again" loop: the lookup a per-object mark procedure makes finds exactly the
// secondaries of live handles of a primary, takes no lock a stopped thread may hold, and stays
// complete when a release moves a node out from under it or growth replaces its table.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
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
};

std::multiset<void*> secondaries_of(const handle_table& table, const void* primary) {
  std::multiset<void*> found;
  table.for_each_secondary_of(primary, [&](void* s) { found.insert(s); });
  return found;
}

std::set<void*> distinct(const std::multiset<void*>& m) { return {m.begin(), m.end()}; }

}  // namespace

TEST_CASE("dependent index: a lookup finds exactly the secondaries of the primary's live handles") {
  handle_table table(handle_table_options{.index_dependents = true});
  const std::size_t primaries = 700;  // enough handles to grow the index twice
  std::vector<cell> objects(primaries), seconds(primaries * 3);
  std::vector<std::vector<handle>> handles(primaries);
  const std::size_t buckets_before = handle_table_access::dependent_index_buckets(table);
  for (std::size_t p = 0; p < primaries; ++p)
    for (std::size_t j = 0; j < 3; ++j)
      handles[p].push_back(table.allocate(handle_kind::dependent, &objects[p], &seconds[p * 3 + j]));
  CHECK(handle_table_access::dependent_index_buckets(table) > buckets_before);
  std::size_t wrong = 0;
  for (std::size_t p = 0; p < primaries; ++p) {
    const auto found = secondaries_of(table, &objects[p]);
    if (found != std::multiset<void*>{&seconds[p * 3], &seconds[p * 3 + 1], &seconds[p * 3 + 2]}) ++wrong;
  }
  CHECK(wrong == 0);

  // Released: gone. Cleared by a sweep (primary dead): gone, though still allocated.
  // A null secondary is not reported.
  table.release(handles[0][1]);
  CHECK(secondaries_of(table, &objects[0]) == std::multiset<void*>{&seconds[0], &seconds[2]});
  const std::size_t cleared = table.sweep_weak(handle_kind::dependent, [&](void* t) { return t != &objects[1]; });
  CHECK(cleared == 3);
  CHECK(secondaries_of(table, &objects[1]).empty());
  table.set_secondary(handles[2][0], nullptr);
  CHECK(secondaries_of(table, &objects[2]) == std::multiset<void*>{&seconds[7], &seconds[8]});
  CHECK(secondaries_of(table, nullptr).empty());
  cell stranger;
  CHECK(secondaries_of(table, &stranger).empty());

  // Slots reused for other primaries (a thread's cache hands back what it just released).
  for (handle h : handles[3]) table.release(h);
  handle reused = table.allocate(handle_kind::dependent, &stranger, &seconds[9]);
  CHECK(secondaries_of(table, &objects[3]).empty());
  CHECK(secondaries_of(table, &stranger) == std::multiset<void*>{&seconds[9]});
  table.release(reused);
  CHECK(secondaries_of(table, &stranger).empty());

  for (std::size_t p = 0; p < primaries; ++p)
    for (std::size_t j = 0; j < 3; ++j)
      if (!(p == 0 && j == 1) && p != 3) table.release(handles[p][j]);
  CHECK(table.counters().handles[static_cast<std::size_t>(handle_kind::dependent)] == 0);
}

TEST_CASE("dependent index: a lookup takes no lock (a stopped thread holds the index's and the kind's)") {
  handle_table table(handle_table_options{.index_dependents = true});
  cell primary;
  std::vector<cell> seconds(5);
  std::vector<handle> hs;
  for (auto& s : seconds) hs.push_back(table.allocate(handle_kind::dependent, &primary, &s));
  {
    // Held by this thread, as by a mutator stopped inside allocate() or release(): the
    // lookup must complete all the same (std::mutex is not recursive: taking either here
    // would never return).
    auto index_lock = handle_table_access::hold_dependent_index_lock(table);
    auto kind_lock = handle_table_access::hold_kind_lock(table, handle_kind::dependent);
    auto blocks_lock = handle_table_access::hold_all_blocks_lock(table);
    CHECK(distinct(secondaries_of(table, &primary)).size() == seconds.size());
    CHECK(table.counters().handles[static_cast<std::size_t>(handle_kind::dependent)] == seconds.size());
  }
  for (handle h : hs) table.release(h);
}

TEST_CASE("dependent index: a node moved to another chain under a lookup does not hide the rest of its chain") {
  // The interleaving the unlink count exists for: the lookup stands on the first node of the
  // primary's chain; its handle is released and the slot reused at once for a primary in
  // another bucket, so the node's next now leads into that bucket's chain. Without the
  // re-read the lookup would finish there and miss the primary's other secondaries.
  handle_table table(handle_table_options{.index_dependents = true});
  cell primary;
  std::vector<cell> seconds(6);
  std::vector<handle> hs;
  for (auto& s : seconds) hs.push_back(table.allocate(handle_kind::dependent, &primary, &s));
  // A primary in another bucket, whose chain holds other nodes (where the moved node leads).
  std::vector<cell> others(64);
  cell* elsewhere = nullptr;
  for (auto& o : others)
    if (handle_table_access::dependent_index_bucket(table, &o) !=
        handle_table_access::dependent_index_bucket(table, &primary)) {
      elsewhere = &o;
      break;
    }
  REQUIRE(elsewhere);
  cell other_secondary;
  handle other = table.allocate(handle_kind::dependent, elsewhere, &other_secondary);

  struct moving {
    handle_table* table;
    handle* first;  // the chain's head: the last allocated
    cell* elsewhere;
    cell* secondary;
    handle moved{};
    int calls = 0;
  } m{&table, &hs.back(), elsewhere, &other_secondary};
  handle_table_access::set_dependent_traversal_hook(
      table,
      [](void* c) {
        auto& m = *static_cast<moving*>(c);
        if (m.calls++ != 0) return;
        m.table->release(*m.first);                                                     // into this thread's cache ...
        m.moved = m.table->allocate(handle_kind::dependent, m.elsewhere, m.secondary);  // ... and out again
      },
      &m);
  const auto found = distinct(secondaries_of(table, &primary));
  handle_table_access::set_dependent_traversal_hook(table, nullptr, nullptr);
  REQUIRE(m.moved);
  CHECK(m.moved == hs.back());  // the same slot: the node did move
  std::set<void*> expected;
  for (std::size_t i = 0; i + 1 < seconds.size(); ++i) expected.insert(&seconds[i]);
  // The first node's secondary may have been reported before it moved; nothing else of the
  // primary's may be missing, and nothing of the other primary's may appear.
  std::size_t missed = 0;
  for (void* s : expected) missed += found.count(s) == 0;
  CHECK(missed == 0);
  CHECK(found.count(&other_secondary) == 0);
  CHECK(m.calls > static_cast<int>(seconds.size()));  // it read the chain again

  for (std::size_t i = 0; i + 1 < hs.size(); ++i) table.release(hs[i]);
  table.release(m.moved);
  table.release(other);
}

TEST_CASE("dependent index: growth that replaces the table under a lookup does not lose secondaries") {
  handle_table table(handle_table_options{.index_dependents = true});
  cell primary;
  std::vector<cell> seconds(4);
  std::vector<handle> hs;
  for (auto& s : seconds) hs.push_back(table.allocate(handle_kind::dependent, &primary, &s));
  const std::size_t buckets = handle_table_access::dependent_index_buckets(table);
  std::vector<cell> fillers(buckets * 2);
  struct growing {
    handle_table* table;
    std::vector<cell>* fillers;
    std::vector<handle> made;
    int calls = 0;
  } g{&table, &fillers, {}};
  handle_table_access::set_dependent_traversal_hook(
      table,
      [](void* c) {
        auto& g = *static_cast<growing*>(c);
        if (g.calls++ != 0) return;
        for (auto& f : *g.fillers) g.made.push_back(g.table->allocate(handle_kind::dependent, &f, &f));
      },
      &g);
  const auto found = distinct(secondaries_of(table, &primary));
  handle_table_access::set_dependent_traversal_hook(table, nullptr, nullptr);
  CHECK(handle_table_access::dependent_index_buckets(table) > buckets);
  CHECK(found == std::set<void*>{&seconds[0], &seconds[1], &seconds[2], &seconds[3]});
  for (handle h : g.made) table.release(h);
  for (handle h : hs) table.release(h);
}

TEST_CASE("dependent index: lookups stay complete while two threads churn dependent handles") {
  // Stable primaries whose handles never change, looked up while two threads allocate and
  // release dependents of other primaries (some in the same buckets): every lookup must find
  // every stable secondary. Bounded by iterations; reports how many were missed.
  handle_table table(handle_table_options{.index_dependents = true});
  constexpr std::size_t stable_count = 64;
  std::vector<cell> stable(stable_count), stable_seconds(stable_count * 2);
  std::vector<handle> stable_handles;
  for (std::size_t i = 0; i < stable_count; ++i) {
    stable_handles.push_back(table.allocate(handle_kind::dependent, &stable[i], &stable_seconds[i * 2]));
    stable_handles.push_back(table.allocate(handle_kind::dependent, &stable[i], &stable_seconds[i * 2 + 1]));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::thread> churners;
  for (int t = 0; t < 2; ++t) {
    churners.emplace_back([&, t] {
      std::vector<cell> mine(512);
      std::vector<handle> held;
      started.fetch_add(1);
      std::uint32_t x = 12345u + static_cast<std::uint32_t>(t);
      while (!stop.load(std::memory_order_relaxed)) {
        x = x * 1664525u + 1013904223u;
        if (held.size() < 300 && (x >> 16) % 3 != 0) {
          cell& c = mine[(x >> 8) % mine.size()];
          held.push_back(table.allocate(handle_kind::dependent, &c, &c));
        } else if (!held.empty()) {
          const std::size_t at = (x >> 4) % held.size();
          table.release(held[at]);
          held[at] = held.back();
          held.pop_back();
        }
      }
      for (handle h : held) table.release(h);
    });
  }
  while (started.load() < 2) std::this_thread::yield();
  std::size_t missed = 0, extra = 0, lookups = 0;
  for (int round = 0; round < 3000; ++round) {
    for (std::size_t i = 0; i < stable_count; i += 7) {
      const auto found = distinct(secondaries_of(table, &stable[i]));
      missed += (found.count(&stable_seconds[i * 2]) == 0) + (found.count(&stable_seconds[i * 2 + 1]) == 0);
      extra += found.size() - std::min<std::size_t>(found.size(), 2);
      ++lookups;
    }
  }
  stop.store(true);
  for (auto& t : churners) t.join();
  INFO(lookups << " lookups: " << missed << " secondaries missed, " << extra << " foreign ones reported");
  CHECK(missed == 0);
  CHECK(extra == 0);
  for (handle h : stable_handles) table.release(h);
  CHECK(table.counters().handles[static_cast<std::size_t>(handle_kind::dependent)] == 0);
}

PALRT_FRESH_PROCESS(dependent_lookup_without_index) {
  handle_table table;
  cell c;
  table.for_each_secondary_of(&c, [](void*) {});
  return 0;
}

TEST_CASE("dependent index: a lookup on a table made without the index aborts with a message") {
  // Misuse, reported as the table's other misuse is: one line, abort (in a fresh process).
  const auto r = palrt::testing::run_fresh("dependent_lookup_without_index");
  CHECK(r.term_signal == SIGABRT);
  CHECK(r.err.find("palrt: handle_table::for_each_secondary_of(") != std::string::npos);
  CHECK(r.err.find("the table was not made with index_dependents") != std::string::npos);
}

// SPDX-License-Identifier: MIT
// The host mode of the identity cache (palrt/interop/host_identity_cache.hpp): the host's own
// objects as wrappers, with both reclamation choices, driven by a small host of reference-
// counted wrappers that know their identity (so a wrong answer is detected, not guessed at).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <mutex>
#include <random>
#include <span>
#include <memory>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "palrt/gc/retire.hpp"
#include "palrt/interop/host_identity_cache.hpp"
#include "palrt/interop/internal/host_map_state.hpp"
#include "palrt/pal/wake_event.hpp"
#include "scale.hpp"

using palrt::interop::host_cache_options;
using palrt::interop::host_entry;
using palrt::interop::host_identity_cache;
using palrt::interop::host_reclamation;
using palrt::interop::host_token;
using palrt::interop::internal::host_cache_access;

namespace {

// The host's object: a count (zero is "being destroyed") and the identity it wraps.
struct wrapper {
  explicit wrapper(const void* id) : identity(id) {}
  std::atomic<long> count{1};
  const void* identity;
  bool marked = true;  // the tracing host's mark bit
};

template <host_reclamation R>
struct counted_policy {
  static constexpr host_reclamation reclamation = R;
  static bool try_acquire(void* p) noexcept {
    auto* w = static_cast<wrapper*>(p);
    long c = w->count.load(std::memory_order_relaxed);
    while (c > 0)
      if (w->count.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) return true;
    return false;
  }
  static void release(void* p) noexcept { static_cast<wrapper*>(p)->count.fetch_sub(1, std::memory_order_acq_rel); }
};
using locked_policy = counted_policy<host_reclamation::host_lock>;
using grace_policy = counted_policy<host_reclamation::grace_period>;

const void* id_of(std::uintptr_t i) { return reinterpret_cast<const void*>(0x10000 + 16 * i); }

template <class Cache>
void sweep_marked(Cache& c) {
  c.sweep([](std::span<void* const> ws, std::span<bool> alive) {
    for (std::size_t i = 0; i < ws.size(); ++i) alive[i] = static_cast<wrapper*>(ws[i])->marked;
  });
}

}  // namespace

TEST_CASE_TEMPLATE("host cache: one wrapper per identity, erase by token, old tokens remove nothing", P, locked_policy,
                   grace_policy) {
  host_identity_cache<P> cache;
  wrapper a(id_of(1));
  host_entry e = cache.insert(id_of(1), &a);
  CHECK(e.inserted);
  CHECK(e.token == host_token(id_of(1), &a));
  void* hit = cache.try_get(id_of(1));
  CHECK(hit == &a);
  CHECK(a.count == 2);
  P::release(&a);
  wrapper b(id_of(1));
  host_entry lost = cache.insert(id_of(1), &b);  // a is alive: a wins
  CHECK_FALSE(lost.inserted);
  CHECK(lost.wrapper == &a);
  P::release(&a);
  CHECK(cache.erase(e.token));
  CHECK_FALSE(cache.erase(e.token));
  CHECK(cache.try_get(id_of(1)) == nullptr);
  host_entry eb = cache.insert(id_of(1), &b);
  CHECK(eb.inserted);
  CHECK_FALSE(cache.erase(e.token));  // a's old token never removes b's entry
  CHECK(cache.find(id_of(1)) == &b);
  CHECK(cache.erase(eb.token));
}

TEST_CASE_TEMPLATE("host cache: reserved identities and null wrappers are refused before the factory", P, locked_policy,
                   grace_policy) {
  host_identity_cache<P> cache;
  const void* all_ones = reinterpret_cast<const void*>(~std::uintptr_t{0});
  int calls = 0;
  auto factory = [&](const void*) -> void* {
    ++calls;
    return nullptr;
  };
  CHECK_THROWS_AS((void)cache.get_or_create(nullptr, factory), std::invalid_argument);
  CHECK_THROWS_AS((void)cache.get_or_create(all_ones, factory), std::invalid_argument);
  CHECK(calls == 0);
  CHECK_THROWS_AS((void)cache.get_or_create(id_of(2), factory), std::invalid_argument);  // null result
  CHECK(calls == 1);
  CHECK(cache.try_get(nullptr) == nullptr);
  CHECK(cache.try_get(all_ones) == nullptr);
  CHECK_FALSE(cache.erase(host_token(all_ones, &calls)));
  CHECK(cache.counters().entries == 0);
}

TEST_CASE_TEMPLATE("host cache: a wrapper being destroyed is replaced, and churn reuses slots instead of rebuilding", P,
                   locked_policy, grace_policy) {
  host_identity_cache<P> cache;
  constexpr std::size_t identities = 64;
  std::vector<std::unique_ptr<wrapper>> live(identities);
  for (std::size_t i = 0; i < identities; ++i) {
    live[i] = std::make_unique<wrapper>(id_of(i));
    REQUIRE(cache.insert(id_of(i), live[i].get()).inserted);
  }
  const auto before = cache.counters();
  const long rounds = 20000 * palrt::testing::scale();
  for (long r = 0; r < rounds; ++r) {
    const std::size_t i = static_cast<std::size_t>(r) % identities;
    // The host drops it: its count reaches zero, then it erases its token (tp_dealloc).
    live[i]->count = 0;
    CHECK_FALSE(cache.try_get(id_of(i)));  // being destroyed: never handed out
    REQUIRE(cache.erase(host_token(id_of(i), live[i].get())));
    live[i] = std::make_unique<wrapper>(id_of(i));
    host_entry e = cache.get_or_create(id_of(i), [&](const void*) -> void* { return live[i].get(); });
    REQUIRE(e.inserted);
  }
  const auto after = cache.counters();
  CHECK(after.entries == identities);
  CHECK(after.rebuilds == before.rebuilds);  // no insert needed a new table
  if constexpr (P::reclamation == host_reclamation::grace_period) {
    // every insert took the tombstone its erase left
    CHECK(after.reused_slots - before.reused_slots == static_cast<std::uint64_t>(rounds));
  } else {
    CHECK(after.tombstones == 0);  // an erase leaves none: the insert takes an empty slot
    CHECK(after.reused_slots == 0);
  }
  // A wrapper whose count is zero but whose token was not erased yet is replaced.
  live[0]->count = 0;
  auto fresh = std::make_unique<wrapper>(id_of(0));
  host_entry e = cache.get_or_create(id_of(0), [&](const void*) -> void* { return fresh.get(); });
  CHECK(e.inserted);
  CHECK(cache.counters().dead_replaced == 1);
  CHECK_FALSE(cache.erase(host_token(id_of(0), live[0].get())));  // its late erase changes nothing
  CHECK(cache.find(id_of(0)) == fresh.get());
}

TEST_CASE_TEMPLATE("host cache: a sweep removes exactly the dead, in batches, and they are never handed out again", P,
                   locked_policy, grace_policy) {
  host_identity_cache<P> cache;
  constexpr std::size_t n = 1000;  // several batches
  std::vector<std::unique_ptr<wrapper>> ws;
  for (std::size_t i = 0; i < n; ++i) {
    ws.push_back(std::make_unique<wrapper>(id_of(i)));
    REQUIRE(cache.insert(id_of(i), ws.back().get()).inserted);
  }
  for (std::size_t i = 0; i < n; i += 3) ws[i]->marked = false;
  std::size_t batches = 0;
  const std::size_t removed = cache.sweep([&](std::span<void* const> batch, std::span<bool> alive) {
    ++batches;
    CHECK(batch.size() <= 256);
    for (std::size_t i = 0; i < batch.size(); ++i) alive[i] = static_cast<wrapper*>(batch[i])->marked;
  });
  CHECK(removed == (n + 2) / 3);
  CHECK(batches >= n / 256);
  CHECK(batches < n / 16);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    void* w = cache.find(id_of(i));
    if ((i % 3 == 0) != (w == nullptr)) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(cache.counters().swept == removed);
  sweep_marked(cache);  // a second sweep finds nothing
  CHECK(cache.counters().swept == removed);
}

TEST_CASE("host cache, grace_period: readers racing writers that reuse slots never get another identity's wrapper") {
  host_identity_cache<grace_policy> cache(host_cache_options{2});
  constexpr std::size_t identities = 48;  // few: slots are reused and tables rebuilt all the time
  std::vector<std::unique_ptr<wrapper>> pool;
  std::mutex pool_lock;
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0}, hits{0};
  std::latch started(3);
  std::thread reader([&] {
    started.arrive_and_wait();
    for (std::uint64_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
      const void* id = id_of(k % identities);
      if (void* w = cache.try_get(id)) {
        if (static_cast<wrapper*>(w)->identity != id) wrong.fetch_add(1);
        hits.fetch_add(1, std::memory_order_relaxed);
        grace_policy::release(w);
      }
    }
  });
  // Writers: each owns half the identities and churns them (wrappers are kept until the end:
  // a reader may hold one).
  auto writer = [&](std::size_t first) {
    started.arrive_and_wait();
    std::vector<wrapper*> mine(identities, nullptr);
    const long rounds = 20000 * palrt::testing::scale();
    for (long r = 0; r < rounds; ++r) {
      const std::size_t i = first + 2 * (static_cast<std::size_t>(r) % (identities / 2));
      if (mine[i]) {
        mine[i]->count = 0;
        cache.erase(host_token(id_of(i), mine[i]));
      }
      auto w = std::make_unique<wrapper>(id_of(i));
      mine[i] = w.get();
      (void)cache.insert(id_of(i), w.get());  // this writer's identities only: always inserted
      std::lock_guard<std::mutex> g(pool_lock);
      pool.push_back(std::move(w));
    }
  };
  std::thread w0(writer, 0), w1(writer, 1);
  w0.join();
  w1.join();
  stop = true;
  reader.join();
  INFO("hits: " << hits.load());
  CHECK(wrong.load() == 0);
  CHECK(cache.counters().entries == identities);
}

namespace {
// Stops a rebuild between reading a dead wrapper's entry from the old table and storing it in
// the new one, as a world stop could, and sweeps there (as the collector would).
struct sweep_in_rebuild final : palrt::interop::internal::rebuild_observer {
  std::function<void()> sweep;
  bool done = false;
  void copying(void* w) noexcept override {
    if (done || static_cast<wrapper*>(w)->marked) return;
    done = true;
    sweep();
  }
};
}  // namespace

TEST_CASE("host cache, grace_period: a sweep that stops a rebuild in the middle of its copy loses no removal") {
  host_identity_cache<grace_policy> cache(host_cache_options{1});
  auto& state = host_cache_access::state(cache);
  std::vector<std::unique_ptr<wrapper>> ws;
  // Fill the table to its last free slot: the next insert rebuilds it.
  std::size_t i = 0;
  for (; cache.counters().slots == 0 || (cache.counters().entries + 2) * 4 <= cache.counters().slots * 3; ++i) {
    ws.push_back(std::make_unique<wrapper>(id_of(i)));
    REQUIRE(cache.insert(id_of(i), ws.back().get()).inserted);
  }
  const auto rebuilds = cache.counters().rebuilds;
  for (std::size_t k = 0; k < ws.size(); k += 2) ws[k]->marked = false;  // dead at the next sweep
  sweep_in_rebuild observer;
  std::size_t swept = 0;
  observer.sweep = [&] {
    swept = cache.sweep([](std::span<void* const> b, std::span<bool> alive) {
      for (std::size_t k = 0; k < b.size(); ++k) alive[k] = static_cast<wrapper*>(b[k])->marked;
    });
  };
  host_cache_access::watch_rebuilds(state, &observer);
  for (; cache.counters().rebuilds == rebuilds; ++i) {
    ws.push_back(std::make_unique<wrapper>(id_of(i)));
    REQUIRE(cache.insert(id_of(i), ws.back().get()).inserted);
  }
  host_cache_access::watch_rebuilds(state, nullptr);
  REQUIRE(observer.done);
  CHECK(swept > 0);
  std::size_t dead_found = 0, live_lost = 0;
  for (std::size_t k = 0; k < ws.size(); ++k) {
    void* w = cache.find(id_of(k));
    if (!ws[k]->marked && w) ++dead_found;
    if (ws[k]->marked && !w) ++live_lost;
  }
  CHECK(dead_found == 0);  // before the fix of the copy loop, the new table kept them
  CHECK(live_lost == 0);
}

TEST_CASE("host cache, grace_period: a hit that meets a writer at work asks under the lock") {
  host_identity_cache<grace_policy> cache(host_cache_options{1});
  auto& state = host_cache_access::state(cache);
  wrapper a(id_of(7));
  REQUIRE(cache.insert(id_of(7), &a).inserted);
  host_cache_access::step_sequence(state, id_of(7));  // odd: as inside a writer's window
  CHECK(cache.find(id_of(7)) == nullptr);             // the lock-free probe gives up
  CHECK(cache.try_get(id_of(7)) == &a);               // the locked path answers
  grace_policy::release(&a);
  host_cache_access::step_sequence(state, id_of(7));  // even: the writer is done
  CHECK(cache.find(id_of(7)) == &a);
}

namespace {

// grace_policy with a place to stop in: what `on_refuse` runs, the thread that called
// try_acquire() runs with the wrapper refused (for an insert: its slot found, its store not
// yet made); what `on_acquire` runs, it runs before it reads the wrapper at all (for try_get:
// the probe done, the wrapper's address in hand).
struct stopping_policy {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static inline std::function<void(void*)> on_refuse;
  static inline std::function<void(void*)> on_acquire;
  static bool try_acquire(void* p) noexcept {
    if (on_acquire) on_acquire(p);
    if (grace_policy::try_acquire(p)) return true;
    if (on_refuse) on_refuse(p);
    return false;
  }
  static void release(void* p) noexcept { grace_policy::release(p); }
};

}  // namespace

TEST_CASE("host cache, grace_period: a sweep that stops an insert replacing a dead wrapper loses neither entry") {
  host_identity_cache<stopping_policy> cache(host_cache_options{1});
  wrapper dying(id_of(3));
  const host_token old_token = cache.insert(id_of(3), &dying).token;
  dying.count = 0;       // being destroyed, its token not erased yet...
  dying.marked = false;  // ...and the collector found it dead
  std::size_t swept = 0;
  // The world stops while the writer holds the refused wrapper: the sweep removes its entry.
  stopping_policy::on_refuse = [&](void*) {
    stopping_policy::on_refuse = nullptr;
    swept = cache.sweep([](std::span<void* const> b, std::span<bool> alive) {
      for (std::size_t k = 0; k < b.size(); ++k) alive[k] = static_cast<wrapper*>(b[k])->marked;
    });
  };
  wrapper fresh(id_of(3));
  const host_entry e = cache.insert(id_of(3), &fresh);
  stopping_policy::on_refuse = nullptr;
  REQUIRE(swept == 1);
  CHECK(e.inserted);
  CHECK(e.wrapper == &fresh);
  CHECK(cache.find(id_of(3)) == &fresh);  // before the fix: null (the store went into a tombstone)
  int made = 0;
  const host_entry again = cache.get_or_create(id_of(3), [&](const void* id) -> void* {
    ++made;
    return new wrapper(id);
  });
  CHECK(made == 0);  // ...and a second live wrapper was made here
  CHECK(again.wrapper == &fresh);
  stopping_policy::release(&fresh);
  CHECK_FALSE(cache.erase(old_token));
  CHECK(cache.erase(e.token));  // ...and this returned false
  const auto c = cache.counters();
  CHECK(c.entries == 0);
  CHECK(c.swept == 1);
}

// The contract of the header's example: a wrapper whose count reached zero is erased and then
// retired (gc::retire), never freed at once, because a try_get() on another thread may have
// found it before the erase and be about to read its count.
TEST_CASE("host cache, grace_period: a wrapper freed through gc::retire is never freed under a try_get that found it") {
  host_identity_cache<stopping_policy> cache(host_cache_options{1});
  auto* w = new wrapper(id_of(5));
  const host_token token = cache.insert(id_of(5), w).token;
  static std::atomic<bool> freed{false};
  static std::atomic<int> read_after_free{0};
  freed = false;
  read_after_free = 0;
  std::latch found(1), may_acquire(1);
  stopping_policy::on_acquire = [&](void*) {
    found.count_down();  // the probe returned w; we are about to read it
    may_acquire.wait();
    if (freed.load()) read_after_free.fetch_add(1);
  };
  void* got = w;
  std::thread reader([&] { got = cache.try_get(id_of(5)); });
  found.wait();
  // The host drops its last reference: zero, erase, and free through a grace period.
  w->count = 0;
  CHECK(cache.erase(token));
  palrt::gc::retire(w, [](void* p) noexcept {
    freed = true;
    delete static_cast<wrapper*>(p);
  });
  CHECK(palrt::gc::reclaim_retired() == 0);  // the reader's section holds it
  CHECK_FALSE(freed.load());
  may_acquire.count_down();
  reader.join();
  stopping_policy::on_acquire = nullptr;
  CHECK(got == nullptr);  // count zero: refused
  CHECK(read_after_free == 0);
  CHECK(palrt::gc::drain_retired());
  CHECK(freed.load());
}

// The map against a model (std::unordered_map) under random inserts, erases and sweeps, in
// one small bucket so that clusters are long and wrap around: every identity the model holds
// is found with its wrapper, and no other. host_lock removes entries by moving its cluster
// back and compacts after sweeps; grace_period leaves tombstones and rebuilds.
TEST_CASE_TEMPLATE("host cache: random inserts, erases and sweeps agree with a model map", P, locked_policy,
                   grace_policy) {
  host_identity_cache<P> cache(host_cache_options{1});
  constexpr std::size_t ids = 300;
  std::vector<std::unique_ptr<wrapper>> ws(ids);
  std::unordered_map<std::size_t, wrapper*> model;
  std::mt19937 rng(12345);
  std::size_t wrong = 0, checks = 0;
  auto verify = [&] {
    for (std::size_t k = 0; k < ids; ++k) {
      auto it = model.find(k);
      void* w = cache.find(id_of(k));
      ++checks;
      if (w != (it == model.end() ? nullptr : it->second)) ++wrong;
    }
  };
  const long rounds = 20000 * palrt::testing::scale();
  for (long r = 0; r < rounds; ++r) {
    const std::size_t k = rng() % ids;
    const unsigned op = rng() % 100;
    if (op < 55) {
      if (!model.count(k)) {
        ws[k] = std::make_unique<wrapper>(id_of(k));
        REQUIRE(cache.insert(id_of(k), ws[k].get()).inserted);
        model[k] = ws[k].get();
      }
    } else if (op < 98) {
      auto it = model.find(k);
      CHECK(cache.erase(host_token(id_of(k), it == model.end() ? ws[0].get() : it->second)) == (it != model.end()));
      if (it != model.end()) model.erase(it);
    } else {
      for (auto& [key, w] : model) w->marked = rng() % 3 != 0;
      const std::size_t removed = cache.sweep([](std::span<void* const> b, std::span<bool> alive) {
        for (std::size_t i = 0; i < b.size(); ++i) alive[i] = static_cast<wrapper*>(b[i])->marked;
      });
      std::size_t dead = 0;
      for (auto it = model.begin(); it != model.end();)
        if (!it->second->marked) {
          ++dead;
          it = model.erase(it);
        } else {
          it->second->marked = true;
          ++it;
        }
      CHECK(removed == dead);
    }
    if (r % 16 == 0) verify();
  }
  verify();
  INFO("wrong answers " << wrong << " of " << checks);
  CHECK(wrong == 0);
  CHECK(cache.counters().entries == model.size());
}

TEST_CASE("host cache, host_lock: churn over many identities with at most one alive rebuilds nothing and stays small") {
  host_identity_cache<locked_policy> cache;
  wrapper w(nullptr);
  const auto before = cache.counters();
  for (std::size_t i = 0; i < 100000; ++i) {
    w.identity = id_of(i);
    const host_entry e = cache.insert(id_of(i), &w);
    REQUIRE(e.inserted);
    REQUIRE(cache.erase(e.token));
  }
  const auto after = cache.counters();
  CHECK(after.rebuilds - before.rebuilds <= 1);  // the first insert makes the table
  CHECK(after.tombstones == 0);
  CHECK(after.slots == 8);
  CHECK(after.entries == 0);
}

TEST_CASE("host cache, host_lock: dropping every wrapper gives the table's memory back") {
  host_identity_cache<locked_policy> cache;
  constexpr std::size_t n = 100000;
  std::vector<std::unique_ptr<wrapper>> ws;
  for (std::size_t i = 0; i < n; ++i) {
    ws.push_back(std::make_unique<wrapper>(id_of(i)));
    REQUIRE(cache.insert(id_of(i), ws.back().get()).inserted);
  }
  const auto full = cache.counters();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::size_t lost = 0;
  for (std::size_t k = 0; k < n; ++k) {
    REQUIRE(cache.erase(host_token(id_of(order[k]), ws[order[k]].get())));
    if (k % 997 == 0)  // the survivors are all still found, after shrinks too
      for (std::size_t m = k + 1; m < n; m += 61) lost += cache.find(id_of(order[m])) != ws[order[m]].get();
  }
  CHECK(lost == 0);
  const auto empty = cache.counters();
  INFO("bytes with " << n << " entries: " << full.bytes << ", after dropping them: " << empty.bytes);
  CHECK(empty.entries == 0);
  CHECK(empty.slots == 8 * empty.buckets);
  CHECK(empty.bytes * 1000 < full.bytes);
}

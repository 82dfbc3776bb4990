// SPDX-License-Identifier: MIT
// The interop identity cache (palrt/interop/identity_cache.hpp): what a host relies on, for
// every design, with real threads, a real collector and a real finalizer thread.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/interop/identity_cache.hpp"
#include "palrt/interop/internal/dispatch_tables_access.hpp"
#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/interop/internal/cache_state.hpp"
#include "palrt/interop/internal/weak_object_table.hpp"
#include "palrt/pal/wake_event.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/internal/handle_table_access.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/startup/internal/baselines.hpp"
#include "scale.hpp"

using namespace std::chrono_literals;
using namespace palrt;
using namespace palrt::gc;
using palrt::interop::internal::cache_design;
using palrt::interop::internal::identity_cache_access;
using palrt::interop::cache_options;
using palrt::interop::identity_cache;
using palrt::interop::identity_mismatch;
using palrt::interop::wrapper_object;
using palrt::interop::wrapper_record;

namespace {

std::atomic<long> proxies_alive{0};

// A host's wrapper with the fields, and one without (side tables).
struct proxy : object, wrapper_object {
  explicit proxy(const void* id) : identity(id) { proxies_alive.fetch_add(1); }
  ~proxy() override { proxies_alive.fetch_sub(1); }
  const void* const identity;
};
struct plain_proxy : object {
  explicit plain_proxy(const void* id) : identity(id) { proxies_alive.fetch_add(1); }
  ~plain_proxy() override { proxies_alive.fetch_sub(1); }
  const void* const identity;
};

constexpr cache_design all_designs[] = {cache_design::palrt, cache_design::bucketed_rwlock, cache_design::single_lock,
                                        cache_design::pybind11_shards};

// Runs `body` once per design, naming the design in every failure.
template <class Body>
void for_each_design(Body body) {
  for (cache_design d : all_designs) {
    const std::string design = palrt::interop::internal::cache_design_name(d);
    CAPTURE(design);
    body(d);
  }
}

// Native identities: distinct, 16-byte aligned heap addresses, as an allocator hands out.
struct natives {
  explicit natives(std::size_t n) : storage(n) {}
  const void* operator[](std::size_t i) const { return &storage[i]; }
  struct alignas(16) native {
    char bytes[16];
  };
  std::vector<native> storage;
};

struct fixture {
  // start_finalizer false: the test starts it (until then, no thread but the test's opens a
  // read section).
  explicit fixture(cache_design d = cache_design::palrt, cache_options o = {}, bool start_finalizer = true)
      : cache(identity_cache_access::make(gc, d, std::move(o))) {
    proxies_alive = 0;
    if (start_finalizer) finalizer.start();
  }
  ~fixture() { (void)finalizer.stop(); }
  // Collects and waits until the records of the wrappers that died have left the cache.
  void settle() {
    for (int round = 0; round < 3; ++round) {
      gc.collect();
      REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
    }
    (void)gc.synchronize();
  }
  template <class T = proxy>
  ref<T> get(const void* id, std::atomic<int>* calls = nullptr) {
    return cache.get_or_create<T>(id, [&](const void* i) {
      if (calls) calls->fetch_add(1);
      return make_object<T>(gc, i);
    });
  }
  handle_table table;
  collector gc{table};
  finalizer_thread finalizer{gc};
  identity_cache cache;
};

// The weak handles of the records (weak-long: identity_cache.hpp, "Resurrection").
std::size_t weak_handles(handle_table& t) {
  return t.counters().handles[static_cast<std::size_t>(handle_kind::weak_long)];
}

// What a host starts and stops as one runtime: a handle table, its collector, the finalizer
// thread and a cache.
struct runtime {
  runtime() { finalizer.start(); }
  ~runtime() { (void)finalizer.stop(); }
  handle_table table;
  collector gc{table};
  finalizer_thread finalizer{gc};
  identity_cache cache{gc};
};

// Wrappers whose finalizer resurrects them into `resurrected` (as a host's finalizer does
// that hands the object to a cleanup queue), with the fields or without (side table): the
// first one finalized after `resurrect_next` is set, only.
ref<finalizable> resurrected;
std::atomic<bool> resurrect_next{false};
// When set, that finalizer first waits for it: the finalizer thread holds a dead wrapper
// unfinalized for as long as a test needs (stopping the thread would not: collect() then runs
// the finalizers itself).
palrt::pal::wake_event* finalize_gate = nullptr;
struct no_fields {};
template <class Fields>
struct resurrecting_proxy : finalizable, Fields {
  explicit resurrecting_proxy(const void* id) : identity(id) { proxies_alive.fetch_add(1); }
  ~resurrecting_proxy() override { proxies_alive.fetch_sub(1); }
  void finalize() override {
    if (!resurrect_next.exchange(false)) return;
    if (finalize_gate) finalize_gate->wait();
    resurrected = resurrect();
  }
  const void* const identity;
};

}  // namespace

TEST_CASE("identity cache: one live wrapper per identity, made once, for every design and wrapper kind") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(65);
    std::atomic<int> calls{0};
    std::vector<ref<proxy>> with_fields;
    std::vector<ref<plain_proxy>> without;
    for (std::size_t i = 0; i < 32; ++i) with_fields.push_back(f.get<proxy>(n[i], &calls));
    for (std::size_t i = 32; i < 64; ++i) without.push_back(f.get<plain_proxy>(n[i], &calls));
    CHECK(calls == 64);
    for (std::size_t i = 0; i < 32; ++i) {
      CHECK(f.get<proxy>(n[i], &calls) == with_fields[i]);
      CHECK(f.cache.try_get(n[i]).get() == with_fields[i].get());
      // Typed like get_or_create<T>: the same wrapper as a ref<proxy>.
      ref<proxy> typed = f.cache.try_get<proxy>(n[i]);
      CHECK(typed == with_fields[i]);
      CHECK(typed->identity == n[i]);
      CHECK(with_fields[i]->identity == n[i]);
      ref<wrapper_record> r = palrt::interop::record_of(*with_fields[i]);
      REQUIRE(r);
      CHECK(r->identity() == n[i]);
      CHECK(r->cache_id() == f.cache.id());
      CHECK(palrt::interop::internal::identity_cache_access::side_table_key(*r) == nullptr);
    }
    CHECK(!f.cache.try_get<proxy>(n[64]));  // never cached: empty, typed or not
    for (std::size_t i = 32; i < 64; ++i) {
      CHECK(f.get<plain_proxy>(n[i], &calls) == without[i - 32]);
      CHECK(f.cache.try_get<plain_proxy>(n[i]) == without[i - 32]);
      ref<wrapper_record> r = palrt::interop::record_of(*without[i - 32]);
      REQUIRE(r);
      CHECK(r->identity() == n[i]);
      CHECK(palrt::interop::internal::identity_cache_access::side_table_key(*r) == without[i - 32].get());
    }
    CHECK(calls == 64);  // hits never call the factory
    const auto c = f.cache.counters();
    CHECK(c.entries == 64);
    CHECK(c.inserted == 64);
    CHECK(c.races_lost == 0);
    {
      read_section s;
      CHECK(f.cache.find(n[3]) == with_fields[3].get());
      CHECK(f.cache.find(n[64]) == nullptr);  // never cached
    }
  });
}

TEST_CASE("identity cache: the same pointer yields the same live wrapper from every thread") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    constexpr std::size_t identities = 256;
    natives n(identities);
    constexpr int threads = 4;
    const long rounds = 20 * palrt::testing::scale();
    std::vector<std::vector<proxy*>> seen(threads, std::vector<proxy*>(identities));
    std::vector<std::vector<ref<proxy>>> held(threads);
    std::atomic<int> calls{0};
    std::latch start(threads);
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        start.arrive_and_wait();
        for (long r = 0; r < rounds; ++r)
          for (std::size_t k = 0; k < identities; ++k) {
            const std::size_t i = (k * 7 + static_cast<std::size_t>(t) * 37) % identities;
            ref<proxy> p = f.get<proxy>(n[i], &calls);
            if (r == 0) {
              seen[t][i] = p.get();
              held[t].push_back(p);  // keeps every wrapper alive: later rounds must hit
            } else if (p.get() != seen[t][i]) {
              seen[t][i] = nullptr;  // reported below
            }
          }
      });
    for (auto& th : team) th.join();
    std::size_t disagreements = 0, wrong_identity = 0;
    for (std::size_t i = 0; i < identities; ++i)
      for (int t = 0; t < threads; ++t) {
        if (seen[t][i] != seen[0][i]) ++disagreements;
        if (!seen[t][i] || seen[t][i]->identity != n[i]) ++wrong_identity;
      }
    INFO("threads that saw another wrapper for an identity: " << disagreements
                                                              << ", wrong wrappers: " << wrong_identity);
    CHECK(disagreements == 0);
    CHECK(wrong_identity == 0);
    const auto c = f.cache.counters();
    CHECK(c.inserted == identities);
    CHECK(c.inserted + c.races_lost == static_cast<std::uint64_t>(calls.load()));
  });
}

TEST_CASE(
    "identity cache: racing get_or_create, both factories run, one wins, both get the winner, the loser is collected") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(1);
    std::latch both_in_factory(2);  // each factory waits for the other: both must miss
    auto racer = [&] {
      return f.cache.get_or_create<proxy>(n[0], [&](const void* id) {
        both_in_factory.arrive_and_wait();
        return make_object<proxy>(f.gc, id);
      });
    };
    auto a = std::async(std::launch::async, racer);
    auto b = std::async(std::launch::async, racer);
    REQUIRE(a.wait_for(10s) == std::future_status::ready);
    REQUIRE(b.wait_for(10s) == std::future_status::ready);
    ref<proxy> pa = a.get(), pb = b.get();
    CHECK(pa == pb);
    CHECK(f.cache.counters().races_lost == 1);
    CHECK(f.cache.counters().inserted == 1);
    f.settle();
    CHECK(proxies_alive == 1);  // the loser's wrapper was dropped and freed
    CHECK(f.cache.try_get(n[0]).get() == pa.get());
  });
}

TEST_CASE("identity cache: no lock is held across the factory (a factory calling back for the same identity from "
          "another thread finishes)") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(1);  // the same identity: the same bucket, whatever the design
    ref<proxy> inner;
    bool joined = false;
    ref<proxy> outer = f.cache.get_or_create<proxy>(n[0], [&](const void* id) {
      // As a QueryInterface that re-enters the runtime on another thread would.
      auto other = std::async(std::launch::async, [&] {
        CHECK(!f.cache.try_get(n[0]));
        return f.get<proxy>(n[0]);
      });
      joined = other.wait_for(10s) == std::future_status::ready;
      if (joined) inner = other.get();
      return make_object<proxy>(f.gc, id);
    });
    REQUIRE(joined);        // a lock held across the factory would have deadlocked the other thread
    CHECK(outer == inner);  // the outer call lost the race to the nested one
    CHECK(f.cache.counters().races_lost == 1);
  });
}

TEST_CASE("identity cache: a dead entry is replaced, and remove by a stale handle leaves the newer entry alone") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(1);
    (void)f.finalizer.stop();  // the old record must not retire before we try its handle
    ref<proxy> first = f.get<proxy>(n[0]);
    const gc::handle first_handle = palrt::interop::record_of(*first)->handle();
    first.reset();  // dead; its entry is still there
    CHECK(!f.cache.try_get(n[0]));
    std::atomic<int> calls{0};
    ref<proxy> second = f.get<proxy>(n[0], &calls);
    CHECK(calls == 1);
    CHECK(f.cache.counters().dead_replaced == 1);
    const gc::handle second_handle = palrt::interop::record_of(*second)->handle();
    CHECK(second_handle != first_handle);
    CHECK_FALSE(f.cache.remove(n[0], first_handle));  // stale: not the entry's handle
    CHECK(f.cache.try_get(n[0]).get() == second.get());
    // The old record retiring (its finalization) removes nothing either.
    f.finalizer.start();
    f.settle();
    CHECK(f.cache.try_get(n[0]).get() == second.get());
    CHECK(f.cache.counters().entries == 1);
    // Evicting the live wrapper by its exact handle works; it stays alive and is cached
    // again, with its own record, when a factory hands it back.
    CHECK(f.cache.remove(n[0], second_handle));
    CHECK(!f.cache.try_get(n[0]));
    ref<proxy> again = f.cache.get_or_create<proxy>(n[0], [&](const void*) { return second; });
    CHECK(again == second);
    CHECK(palrt::interop::record_of(*second)->handle() == second_handle);
    CHECK(f.cache.try_get(n[0]).get() == second.get());
  });
}

TEST_CASE("identity cache: a wrapper's finalization removes its entry and frees its one handle") {
  for_each_design([&](cache_design d) {
    natives n(2000);
    std::atomic<int> removed_seen{0};
    cache_options o;
    o.on_removed = [](void* c, const void*) noexcept { static_cast<std::atomic<int>*>(c)->fetch_add(1); };
    o.on_removed_context = &removed_seen;
    fixture f(d, o);
    const std::size_t side_before = palrt::interop::internal::record_side_table().size();
    const std::size_t handles_before = weak_handles(f.table);
    {
      std::vector<ref<object>> all;
      for (std::size_t i = 0; i < 1000; ++i) all.push_back(f.get<proxy>(n[i]));
      for (std::size_t i = 1000; i < 2000; ++i) all.push_back(f.get<plain_proxy>(n[i]));
      CHECK(weak_handles(f.table) == handles_before + 2000);  // one weak handle per wrapper
      CHECK(palrt::interop::internal::record_side_table().size() == side_before + 1000);
    }
    f.settle();
    const auto c = f.cache.counters();
    INFO("entries left: " << c.entries << ", removed: " << c.removed);
    CHECK(proxies_alive == 0);
    CHECK(c.entries == 0);
    CHECK(c.removed == 2000);
    CHECK(removed_seen == 2000);
    CHECK(weak_handles(f.table) == handles_before);
    CHECK(palrt::interop::internal::record_side_table().size() == side_before);
    CHECK(f.gc.counters().objects_created == f.gc.counters().objects_freed);
  });
}

TEST_CASE("identity cache: bad input is refused and leaves the cache usable") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(3);
    CHECK_THROWS_AS(f.get<proxy>(nullptr), std::invalid_argument);
    CHECK_FALSE(f.cache.try_get(nullptr));
    // A throwing factory: the exception reaches the caller, nothing is inserted.
    CHECK_THROWS_WITH_AS(
        f.cache.get_or_create<proxy>(
            n[0], [](const void*) -> ref<proxy> { throw std::runtime_error("QueryInterface failed"); }),
        "QueryInterface failed", std::runtime_error);
    CHECK(f.cache.counters().entries == 0);
    ref<proxy> ok = f.get<proxy>(n[0]);  // the bucket is usable
    CHECK(f.cache.try_get(n[0]).get() == ok.get());
    // A factory returning nothing.
    CHECK_THROWS_AS(f.cache.get_or_create<proxy>(n[1], [](const void*) { return ref<proxy>(); }),
                    std::invalid_argument);
    // A factory returning the wrapper of another identity (both kinds of wrapper).
    ref<plain_proxy> plain = f.get<plain_proxy>(n[2]);
    try {
      (void)f.cache.get_or_create<proxy>(n[1], [&](const void*) { return ok; });
      FAIL("no identity_mismatch");
    } catch (const identity_mismatch& e) {
      CHECK(e.asked() == n[1]);
      CHECK(e.registered() == n[0]);
      CHECK(std::string(e.what()).find("returned the wrapper of identity") != std::string::npos);
    }
    CHECK_THROWS_AS(f.cache.get_or_create<plain_proxy>(n[1], [&](const void*) { return plain; }), identity_mismatch);
    CHECK_FALSE(f.cache.try_get(n[1]));
    CHECK(f.cache.counters().entries == 2);
    // A wrapper of another collector.
    {
      handle_table other_table;
      collector other(other_table);
      CHECK_THROWS_AS(f.cache.get_or_create<proxy>(n[1], [&](const void* id) { return make_object<proxy>(other, id); }),
                      std::invalid_argument);
    }  // the refused wrapper is freed with its collector
    // remove() of an identity never cached, or of a null handle.
    CHECK_FALSE(f.cache.remove(n[1], palrt::interop::record_of(*ok)->handle()));
    CHECK_FALSE(f.cache.remove(n[0], gc::handle{}));
    CHECK_FALSE(f.cache.remove(nullptr, palrt::interop::record_of(*ok)->handle()));
    CHECK(f.cache.try_get(n[0]).get() == ok.get());
    // Nothing leaked by the refused calls: after a collection only the two live wrappers remain.
    f.settle();
    CHECK(proxies_alive == 2);
    CHECK(weak_handles(f.table) == 2);
  });
}

TEST_CASE("identity cache: a wrapper of another cache is refused, and each cache keeps its own") {
  fixture f;
  identity_cache second(f.gc);
  CHECK(second.id() != f.cache.id());
  natives n(1);
  ref<proxy> mine = f.get<proxy>(n[0]);
  CHECK_THROWS_WITH_AS(second.get_or_create<proxy>(n[0], [&](const void*) { return mine; }),
                       doctest::Contains("another cache"), std::invalid_argument);
  ref<proxy> theirs = second.get_or_create<proxy>(n[0], [&](const void* id) { return make_object<proxy>(f.gc, id); });
  CHECK(theirs != mine);
  CHECK(f.cache.try_get(n[0]).get() == mine.get());
}

TEST_CASE("identity cache: tombstones are compacted away instead of growing the table, lookups right throughout") {
  fixture f(cache_design::palrt, {.buckets = 1});
  CHECK(f.cache.bucket_count() == 1);
  natives n(64);
  std::vector<ref<proxy>> keep;
  for (std::size_t i = 0; i < 8; ++i) keep.push_back(f.get<proxy>(n[i]));
  const long rounds = 200 * palrt::testing::scale();
  for (long r = 0; r < rounds; ++r) {
    const std::size_t i = 8 + static_cast<std::size_t>(r) % 56;
    ref<proxy> p = f.get<proxy>(n[i]);
    REQUIRE(f.cache.remove(n[i], palrt::interop::record_of(*p)->handle()));
    REQUIRE(!f.cache.try_get(n[i]));
  }
  for (std::size_t i = 0; i < 8; ++i) CHECK(f.cache.try_get(n[i]).get() == keep[i].get());
  const auto c = f.cache.counters();
  INFO("rebuilds " << c.rebuilds << ", tombstones " << c.tombstones << ", entries " << c.entries);
  CHECK(c.rebuilds > 0);
  CHECK(c.entries == 8);
  CHECK(c.tombstones < 32);  // bounded by the table's size, not by the churn
  // Replaced tables are freed after a grace period, in batches of 16.
  CHECK(c.retired_tables < 16);
}

namespace {

// Holds the first reclaim of a map between its scan of the readers and its lock, so that the
// test acts in that window; later reclaims (other threads') pass through.
struct pause_first_reclaim final : palrt::interop::internal::reclaim_observer {
  void scanned() noexcept override {
    if (taken.exchange(true)) return;
    in_window = true;
    paused.count_down();
    resume.wait();
  }
  std::atomic<bool> taken{false};
  bool in_window = false;  // written before paused.count_down(), read after paused.wait()
  std::latch paused{1};    // the first reclaimer is in the window, or gave up (in_window false)
  std::latch resume{1};
};

}  // namespace

// The reclaimer's two steps are its scan of the readers and, after it, the walk of the retired
// list under its lock. A table retired between them (by another writer, of this bucket or of
// another) was not seen by the scan; a reader that loaded it after the scan still probes it.
TEST_CASE(
    "identity cache: a table retired while a reclaim is between its scan and its lock is not freed under a reader") {
  for (const bool same_bucket : {true, false}) {
    CAPTURE(same_bucket);
    // No finalizer thread yet: the paused reclaim's scan must find no reader at all.
    fixture f(cache_design::palrt, {.buckets = 2}, false);
    palrt::interop::internal::bucket_map* map = identity_cache_access::buckets(f.cache);
    REQUIRE(map);
    const unsigned bits = map->view().bucket_bits;
    REQUIRE(bits == 1);
    natives n(1024);
    std::vector<const void*> in[2];  // identities by bucket
    for (std::size_t i = 0; i < 1024; ++i)
      in[palrt::interop::internal::bucket_of(palrt::interop::internal::fibonacci_hash(n[i]), bits)].push_back(n[i]);
    REQUIRE(in[0].size() > 64);
    REQUIRE(in[1].size() > 64);
    const std::size_t yb = same_bucket ? 0 : 1;  // Y's bucket; X churns bucket 0
    // A live entry in each bucket, so that every table of it holds one.
    const ref<proxy> anchor[2] = {f.get(in[0][0]), f.get(in[1][0])};

    pause_first_reclaim pause;
    identity_cache_access::watch_reclaims(*map, &pause);
    // X: inserts and removes in bucket 0 (tombstones, so compactions) until the rebuild of one
    // of its inserts makes a batch due: its reclaim scans (no reader) and pauses.
    std::thread x([&] {
      for (std::size_t k = 0; k < 4000 && !pause.taken.load(); ++k) {
        const void* id = in[0][1 + k % 64];
        ref<proxy> p = f.get(id);
        f.cache.remove(id, palrt::interop::record_of(*p)->handle());
      }
      if (!pause.taken.exchange(true)) pause.paused.count_down();  // no reclaim came: say so
    });
    pause.paused.wait();
    bool retired_by_y = false, kept = false;
    object* probed = nullptr;
    if (pause.in_window) {
      // R: opens a section after X's scan and loads the table of Y's bucket.
      read_section r;
      palrt::interop::detail::bucket_table* t = identity_cache_access::table_of(*map, in[yb][0]);
      // Y: inserts into that bucket until its table is replaced: t is retired.
      std::vector<ref<proxy>> grown;
      std::thread y([&] {
        for (std::size_t k = 1; k < in[yb].size() && identity_cache_access::table_of(*map, in[yb][0]) == t; ++k)
          grown.push_back(f.get(in[yb][k]));
      });
      y.join();
      retired_by_y = identity_cache_access::is_retired(*map, t);
      pause.resume.count_down();  // X takes the lock and walks the retired list
      x.join();
      kept = identity_cache_access::is_retired(*map, t);
      if (kept) {
        // R's hit path on the table it loaded, still in its section.
        std::atomic<palrt::interop::detail::bucket_table*> held[2];
        for (auto& h : held) h.store(t, std::memory_order_relaxed);
        const palrt::interop::detail::bucket_view view{bits, held};
        probed = palrt::interop::detail::find_in_buckets(view, in[yb][0]);
      }
    } else {
      x.join();
    }
    identity_cache_access::watch_reclaims(*map, nullptr);
    REQUIRE_MESSAGE(pause.in_window, "X's churn never made a batch of retired tables due");
    REQUIRE_MESSAGE(retired_by_y, "Y did not retire the table R loaded");
    CHECK_MESSAGE(kept, "the reclaim freed a table retired after its scan, which a reader still probes");
    if (kept) CHECK(probed == anchor[yb].get());
    f.finalizer.start();
    f.settle();
  }
}

TEST_CASE("identity cache: outbound wrappers, one per object and cache, in the field for the first cache and a side "
          "table for others") {
  fixture f;
  identity_cache other(f.gc);
  natives n(2);
  ref<proxy> managed = make_object<proxy>(f.gc, n[0]);
  ref<plain_proxy> plain = make_object<plain_proxy>(f.gc, n[1]);
  std::atomic<int> made{0};
  auto factory = [&](const auto&) {
    made.fetch_add(1);
    return make_object<plain_proxy>(f.gc, nullptr);
  };
  ref<object> a = f.cache.get_or_create_outbound(managed, factory);
  ref<object> b = other.get_or_create_outbound(managed, factory);
  ref<object> c = f.cache.get_or_create_outbound(plain, factory);
  CHECK(made == 3);
  CHECK(a != b);
  CHECK(f.cache.get_or_create_outbound(managed, factory) == a);
  CHECK(other.get_or_create_outbound(managed, factory) == b);
  CHECK(f.cache.get_or_create_outbound(plain, factory) == c);
  CHECK(f.cache.try_get_outbound(*managed) == a);
  CHECK(other.try_get_outbound(*managed) == b);
  CHECK(!other.try_get_outbound(*plain));
  CHECK(made == 3);
  // The field belongs to the first cache: its wrapper is read straight from the object.
  CHECK(palrt::interop::detail::wrapper_access::outbound_cache_id(*managed).load() == f.cache.id());
  CHECK(palrt::interop::detail::wrapper_access::outbound(*managed).load() == a.get());
  // Outbound wrappers live as long as their object, and the caches never keep the object.
  const std::size_t handles_before = f.table.counters().handles[static_cast<std::size_t>(handle_kind::dependent)];
  CHECK(handles_before == 2);  // other's entry for managed, f.cache's for plain
  a.reset();
  b.reset();
  c.reset();
  managed.reset();
  plain.reset();
  f.settle();
  CHECK(proxies_alive == 0);
}

TEST_CASE("identity cache: racing outbound publications, one winner, the loser dropped") {
  fixture f;
  natives n(1);
  for (bool with_fields : {true, false}) {
    CAPTURE(with_fields);
    ref<object> managed =
        with_fields ? ref<object>(make_object<proxy>(f.gc, n[0])) : ref<object>(make_object<plain_proxy>(f.gc, n[0]));
    std::latch both_in_factory(2);
    auto racer = [&] {
      auto factory = [&](const auto&) {
        both_in_factory.arrive_and_wait();
        return make_object<plain_proxy>(f.gc, nullptr);
      };
      if (with_fields) return f.cache.get_or_create_outbound(static_ref_cast<proxy>(managed), factory);
      return f.cache.get_or_create_outbound(static_ref_cast<plain_proxy>(managed), factory);
    };
    auto x = std::async(std::launch::async, racer);
    auto y = std::async(std::launch::async, racer);
    REQUIRE(x.wait_for(10s) == std::future_status::ready);
    REQUIRE(y.wait_for(10s) == std::future_status::ready);
    ref<object> wx = x.get(), wy = y.get();
    CHECK(wx == wy);
    wx.reset();
    wy.reset();
    f.settle();
    CHECK(proxies_alive == 2);  // managed and the winner; the loser was freed
    managed.reset();
    f.settle();
    CHECK(proxies_alive == 0);
  }
}

TEST_CASE("identity cache: wrappers may outlive their cache; a new cache never sees an old cache's outbound wrapper") {
  fixture f;
  natives n(2);
  ref<proxy> inbound;
  ref<proxy> managed = make_object<proxy>(f.gc, n[1]);
  {
    identity_cache gone(f.gc);
    inbound = gone.get_or_create<proxy>(n[0], [&](const void* id) { return make_object<proxy>(f.gc, id); });
    (void)gone.get_or_create_outbound(managed, [&](const auto&) { return make_object<plain_proxy>(f.gc, nullptr); });
  }
  identity_cache fresh(f.gc);
  CHECK(!fresh.try_get(n[0]));
  CHECK(!fresh.try_get_outbound(*managed));
  ref<object> mine =
      fresh.get_or_create_outbound(managed, [&](const auto&) { return make_object<plain_proxy>(f.gc, nullptr); });
  CHECK(mine.get() != palrt::interop::detail::wrapper_access::outbound(*managed).load());  // side table
  CHECK(fresh.try_get_outbound(*managed) == mine);
  // The wrapper of the destroyed cache retires quietly: its record finds the map closed.
  const std::size_t handles_before = weak_handles(f.table);
  inbound.reset();
  managed.reset();
  mine.reset();
  f.settle();
  CHECK(proxies_alive == 0);
  CHECK(weak_handles(f.table) == handles_before - 1);
}

TEST_CASE(
    "identity cache: bounded stress, creations and drops while collections and the finalizer remove dead entries") {
  for_each_design([&](cache_design d) {
    handle_table table;
    collector gc(table, {.collect_every = 512});
    finalizer_thread finalizer(gc);
    finalizer.start();
    proxies_alive = 0;
    {
      std::atomic<std::uint64_t> retired{0};
      cache_options o{.buckets = 2};
      o.on_removed = [](void* c, const void*) noexcept { static_cast<std::atomic<std::uint64_t>*>(c)->fetch_add(1); };
      o.on_removed_context = &retired;
      identity_cache cache = identity_cache_access::make(gc, d, o);
      constexpr std::size_t identities = 512;
      natives n(identities);
      std::vector<ref<proxy>> rooted;
      for (std::size_t i = 0; i < 32; ++i)
        rooted.push_back(cache.get_or_create<proxy>(n[i], [&](const void* id) { return make_object<proxy>(gc, id); }));
      constexpr int threads = 3;
      const long ops = 20000 * palrt::testing::scale();
      std::atomic<long> wrong{0}, lost_rooted{0};
      std::latch start(threads + 1);
      std::vector<std::thread> team;
      for (int t = 0; t < threads; ++t)
        team.emplace_back([&, t] {
          start.arrive_and_wait();
          std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
          for (long k = 0; k < ops; ++k) {
            x = palrt::interop::internal::splitmix64(x);
            const std::size_t i = x % identities;
            if (i < 32) {
              ref<object> r = cache.try_get(n[i]);
              if (r.get() != rooted[i].get()) lost_rooted.fetch_add(1);
              continue;
            }
            ref<proxy> p = cache.get_or_create<proxy>(n[i], [&](const void* id) { return make_object<proxy>(gc, id); });
            if (p->identity != n[i]) wrong.fetch_add(1);
            if (x & 1) {
              read_section s;
              object* seen = cache.find(n[i]);
              if (seen && static_cast<proxy*>(seen)->identity != n[i]) wrong.fetch_add(1);
            }
          }
        });
      std::thread collecting([&] {
        start.arrive_and_wait();
        for (int k = 0; k < 50; ++k) gc.collect();
      });
      for (auto& th : team) th.join();
      collecting.join();
      INFO("wrong wrappers: " << wrong << ", rooted wrappers not found: " << lost_rooted);
      CHECK(wrong == 0);
      CHECK(lost_rooted == 0);
      rooted.clear();
      for (int round = 0; round < 3; ++round) {
        gc.collect();
        REQUIRE(finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
      }
      const auto c = cache.counters();
      INFO("entries left " << c.entries << ", inserted " << c.inserted << ", removed " << c.removed
                           << ", dead replaced " << c.dead_replaced);
      CHECK(proxies_alive == 0);
      CHECK(c.entries == 0);
      // Every inserted entry left (removed by its record, replaced, or dropped by
      // compaction), and every cached wrapper's record retired and said so exactly once.
      CHECK(c.removed + c.dead_replaced <= c.inserted);
      INFO("records retired " << retired.load() << " of " << c.inserted << " cached wrappers");
      CHECK(retired.load() == c.inserted);
    }
    (void)finalizer.stop();
    CHECK(weak_handles(table) == 0);
    CHECK(gc.synchronize());
  });
}

TEST_CASE("identity cache: out of handles, get_or_create throws, inserts nothing, and works once memory is back") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(3);
    // The record's weak handle cannot be allocated (a fresh table has no block yet).
    palrt::gc::internal::handle_table_access::fail_block_allocations(f.table, 1000);
    CHECK_THROWS_AS(f.get<proxy>(n[0]), handle_allocation_error);
    CHECK(!f.cache.try_get(n[0]));
    palrt::gc::internal::handle_table_access::fail_block_allocations(f.table, 0);
    ref<proxy> first = f.get<proxy>(n[0]);  // now there is a weak block
    // A wrapper without the fields also needs a dependent handle for the side table: that
    // one fails under the bucket's lock, and the insert unwinds.
    palrt::gc::internal::handle_table_access::fail_block_allocations(f.table, 1000);
    CHECK_THROWS_AS(f.get<plain_proxy>(n[1]), handle_allocation_error);
    CHECK(!f.cache.try_get(n[1]));
    CHECK(f.cache.counters().entries == 1);
    palrt::gc::internal::handle_table_access::fail_block_allocations(f.table, 0);
    ref<plain_proxy> second = f.get<plain_proxy>(n[1]);
    CHECK(f.cache.try_get(n[1]).get() == second.get());
    f.settle();
    CHECK(proxies_alive == 2);  // the refused wrappers were freed
    CHECK(weak_handles(f.table) == 2);
  });
}

namespace {
template <int N>
void slot_fn() {}
const palrt::interop::dispatch_slot base_slots[] = {&slot_fn<0>, &slot_fn<1>, &slot_fn<2>};
const palrt::interop::dispatch_slot methods_a[] = {&slot_fn<10>};
const palrt::interop::dispatch_slot methods_b[] = {&slot_fn<20>, &slot_fn<21>};
const palrt::interop::interface_id id_a = palrt::interop::interface_id::from_guid(0xa, 0, 0, {0, 0, 0, 0, 0, 0, 0, 1});
const palrt::interop::interface_id id_b = palrt::interop::interface_id::from_guid(0xb, 0, 0, {0, 0, 0, 0, 0, 0, 0, 2});
const palrt::interop::interface_descriptor iface_a{id_a, "IA", methods_a};
const palrt::interop::interface_descriptor iface_b{id_b, "IB", methods_b};
const palrt::interop::interface_descriptor* const both[] = {&iface_a, &iface_b};
const palrt::interop::type_descriptor hiding_first_type{"CacheHidingFirst", base_slots, both};
const palrt::interop::type_descriptor exposing_first_type{"CacheExposingFirst", base_slots, both};

palrt::interop::dispatch_policy hide_b() {
  return {[](void*, const palrt::interop::type_descriptor&, const palrt::interop::interface_descriptor& i) noexcept {
            return i.id != id_b;
          },
          nullptr};
}
}  // namespace

TEST_CASE("identity cache: dispatch tables are built once for the process; each cache sees its own policy, in both "
          "creation orders") {
  using palrt::interop::internal::dispatch_tables_access;
  handle_table table;
  collector gc(table);
  for (const auto* type : {&hiding_first_type, &exposing_first_type}) {
    const bool hiding_first = type == &hiding_first_type;
    CAPTURE(hiding_first);
    const std::uint64_t built_before = dispatch_tables_access::tables_built();
    auto first = std::make_unique<identity_cache>(
        gc, cache_options{.dispatch = hiding_first ? hide_b() : palrt::interop::dispatch_policy{}});
    auto second = std::make_unique<identity_cache>(
        gc, cache_options{.dispatch = hiding_first ? palrt::interop::dispatch_policy{} : hide_b()});
    identity_cache& hiding = hiding_first ? *first : *second;
    identity_cache& exposing = hiding_first ? *second : *first;
    // The first cache to ask builds the table; the second finds it.
    const palrt::interop::dispatch_slot* a_first = first->dispatch().find(*type, id_a);
    CHECK(dispatch_tables_access::tables_built() == built_before + 1);
    const palrt::interop::dispatch_slot* a_second = second->dispatch().find(*type, id_a);
    CHECK(dispatch_tables_access::tables_built() == built_before + 1);
    CHECK((a_first == a_second));  // the same process-wide vtable
    CHECK((hiding.dispatch().find(*type, id_b) == nullptr));
    const palrt::interop::dispatch_slot* b = exposing.dispatch().find(*type, id_b);
    REQUIRE((b != nullptr));
    CHECK((b[0] == &slot_fn<0>));   // base slots first
    CHECK((b[3] == &slot_fn<20>));  // then the interface's methods
    // A new cache never rebuilds, and sees its own policy (here: everything).
    second.reset();
    identity_cache third(gc);
    CHECK((third.dispatch().find(*type, id_b) == b));
    CHECK(dispatch_tables_access::tables_built() == built_before + 1);
  }
}

TEST_CASE("identity cache: a const factory, and a const one for outbound wrappers, are accepted") {
  fixture f;
  natives n(1);
  const auto make = [&f](const void* id) { return make_object<proxy>(f.gc, id); };
  ref<proxy> p = f.cache.get_or_create<proxy>(n[0], make);
  CHECK(f.cache.get_or_create<proxy>(n[0], make) == p);
  const auto make_outbound = [&f](const ref<proxy>&) { return make_object<plain_proxy>(f.gc, nullptr); };
  ref<object> o = f.cache.get_or_create_outbound(p, make_outbound);
  CHECK(f.cache.get_or_create_outbound(p, make_outbound) == o);
}

TEST_CASE("identity cache: a wrapper without the fields that outlives its runtime is dropped later, and the next "
          "runtime's caches work") {
  natives n(1002);
  ref<plain_proxy> survivor;
  ref<proxy> survivor_with_fields;
  {
    // Runtime 1 ends while the host still holds two wrappers: its collector and handle table
    // say so on stderr and leave them allocated, so that dropping them later is safe.
    auto first = std::make_unique<runtime>();
    auto make_plain = [&](const void* id) { return make_object<plain_proxy>(first->gc, id); };
    survivor = first->cache.get_or_create<plain_proxy>(n[0], make_plain);
    survivor_with_fields =
        first->cache.get_or_create<proxy>(n[1], [&](const void* id) { return make_object<proxy>(first->gc, id); });
    REQUIRE(palrt::interop::record_of(*survivor));
    first.reset();
  }
  survivor.reset();  // dead, in a collector that no longer collects
  survivor_with_fields.reset();

  // Runtime 2: enough wrappers without the fields that every shard of the record side table
  // is swept at least once, the survivor's among them.
  auto second = std::make_unique<runtime>();
  std::vector<ref<plain_proxy>> wrappers;
  for (std::size_t i = 2; i < 1002; ++i)
    wrappers.push_back(second->cache.get_or_create<plain_proxy>(
        n[i], [&](const void* id) { return make_object<plain_proxy>(second->gc, id); }));
  for (std::size_t i = 2; i < 1002; ++i) {
    ref<wrapper_record> r = palrt::interop::record_of(*wrappers[i - 2]);
    REQUIRE(r);
    CHECK(r->identity() == n[i]);
    CHECK(second->cache.try_get(n[i]).get() == wrappers[i - 2].get());
  }
  wrappers.clear();
  for (int round = 0; round < 3; ++round) {
    second->gc.collect();
    REQUIRE(second->finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  }
  CHECK(second->gc.synchronize());
  CHECK(second->cache.counters().entries == 0);
  CHECK(second->gc.counters().objects_created == second->gc.counters().objects_freed);
}

namespace {
template <class W>
void check_resurrected_wrapper_stays_cached(cache_design d) {
  fixture f(d);
  resurrected.reset();
  resurrect_next = true;
  natives n(1);
  std::atomic<int> calls{0};
  ref<W> first = f.get<W>(n[0], &calls);
  const finalizable* const address = first.get();
  first.reset();  // dead: a collection queues it, and its finalizer resurrects it
  f.gc.collect();
  REQUIRE(f.finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  REQUIRE(resurrected.get() == address);
  f.gc.collect();  // alive again: nothing happens to it or its record
  // The cached wrapper is the resurrected one: no second wrapper for the identity.
  CHECK(f.cache.try_get(n[0]).get() == address);
  CHECK(f.get<W>(n[0], &calls).get() == address);
  {
    read_section s;
    CHECK(f.cache.find(n[0]) == address);
  }
  CHECK(calls == 1);
  CHECK(proxies_alive == 1);
  {
    ref<wrapper_record> r = palrt::interop::record_of(static_cast<const W&>(*resurrected));
    REQUIRE(r);
    CHECK(r->identity() == n[0]);
  }
  // Dropped for good (finalized once already): freed, and its record removes its entry.
  resurrected.reset();
  f.settle();
  CHECK(proxies_alive == 0);
  CHECK(f.cache.counters().entries == 0);
  CHECK(!f.cache.try_get(n[0]));
}

template <class W>
void check_wrapper_replaced_while_dead_is_no_longer_cached(cache_design d) {
  fixture f(d);
  resurrected.reset();
  resurrect_next = true;
  natives n(1);
  std::atomic<int> calls{0};
  palrt::pal::wake_event gate;  // the dead wrapper's finalizer finishes only after the lookup below
  finalize_gate = &gate;
  ref<W> first = f.get<W>(n[0], &calls);
  const finalizable* const old_address = first.get();
  first.reset();
  f.gc.collect();  // queued for finalization: dead, and not handed out (zero is terminal)
  CHECK(!f.cache.try_get(n[0]));
  ref<W> second = f.get<W>(n[0], &calls);
  CHECK(calls == 2);
  CHECK(f.cache.counters().dead_replaced == 1);
  gate.set();
  REQUIRE(f.finalizer.wait_for_pending_finalizers(10s) == pending_finalizers::finalized);
  finalize_gate = nullptr;
  REQUIRE(resurrected.get() == old_address);
  // The old wrapper came back uncached: the identity's wrapper is the new one.
  CHECK(f.cache.try_get(n[0]).get() == second.get());
  CHECK(f.get<W>(n[0], &calls) == second);
  CHECK(calls == 2);
  resurrected.reset();
  f.settle();
  CHECK(f.cache.try_get(n[0]).get() == second.get());  // the old record removed nothing
  second.reset();
  f.settle();
  CHECK(proxies_alive == 0);
  CHECK(f.cache.counters().entries == 0);
}
}  // namespace

TEST_CASE("identity cache: a wrapper its finalizer resurrects is still the one wrapper of its identity") {
  for_each_design([&](cache_design d) {
    check_resurrected_wrapper_stays_cached<resurrecting_proxy<wrapper_object>>(d);
    check_resurrected_wrapper_stays_cached<resurrecting_proxy<no_fields>>(d);
  });
}

TEST_CASE("identity cache: a wrapper replaced while it was dead comes back uncached if its finalizer resurrects it") {
  for_each_design([&](cache_design d) {
    check_wrapper_replaced_while_dead_is_no_longer_cached<resurrecting_proxy<wrapper_object>>(d);
    check_wrapper_replaced_while_dead_is_no_longer_cached<resurrecting_proxy<no_fields>>(d);
  });
}

TEST_CASE("identity cache: the identity ~0 is reserved, and refused with a message that says so") {
  for_each_design([&](cache_design d) {
    fixture f(d);
    natives n(1);
    const void* const reserved = reinterpret_cast<const void*>(~std::uintptr_t{0});
    std::atomic<int> calls{0};
    CHECK_THROWS_WITH_AS(f.get<proxy>(reserved, &calls), doctest::Contains("reserved"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(f.get<proxy>(nullptr, &calls), doctest::Contains("null"), std::invalid_argument);
    CHECK(calls == 0);  // refused before the factory
    CHECK(!f.cache.try_get(reserved));
    {
      read_section s;
      CHECK(f.cache.find(reserved) == nullptr);
    }
    ref<proxy> ok = f.get<proxy>(n[0]);
    CHECK_FALSE(f.cache.remove(reserved, palrt::interop::record_of(*ok)->handle()));
    CHECK(f.cache.counters().entries == 1);
    CHECK(f.cache.try_get(n[0]).get() == ok.get());
  });
}

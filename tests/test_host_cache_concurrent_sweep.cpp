// SPDX-License-Identifier: MIT
// The host-mode identity cache (palrt/interop/host_identity_cache.hpp) for a host that sweeps
// with the world running (a JVM binding: its collector clears weak references, and nothing
// per wrapper runs afterwards): sweep_concurrently() beside lookups and inserts, and
// host_entry::replaced, the dying wrapper an insert took over. What such a host relies on:
// every wrapper the cache stops holding is handed to it exactly once (by the sweep's is_alive
// or by an insert's `replaced`), none is handed out after that, and a lookup that found one
// just before it was removed can still use it until a grace period has passed.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/interop/host_identity_cache.hpp"
#include "palrt/pal/fork.hpp"

using palrt::interop::host_entry;
using palrt::interop::host_identity_cache;
using palrt::interop::host_reclamation;

namespace {

const void* id_of(std::uintptr_t i) { return reinterpret_cast<const void*>(0x40000 + 16 * i); }

// A runtime's weak reference to a wrapper: the collector clears it, and nothing runs after.
struct weak_ref {
  std::atomic<bool> cleared{false};
};

template <host_reclamation R>
struct weak_policy {
  static constexpr host_reclamation reclamation = R;
  static bool try_acquire(void* w) noexcept { return !static_cast<weak_ref*>(w)->cleared.load(); }
  static void release(void*) noexcept {}
};

// is_alive for a sweep: a cleared reference is dead; collects the dead ones, which the host
// now owns.
struct collecting_liveness {
  std::vector<void*>* dead;
  void operator()(std::span<void* const> wrappers, std::span<bool> alive) const {
    for (std::size_t i = 0; i < wrappers.size(); ++i) {
      alive[i] = !static_cast<weak_ref*>(wrappers[i])->cleared.load();
      if (!alive[i]) dead->push_back(wrappers[i]);
    }
  }
};

// A lookup stopped inside try_acquire until the test lets it go: its read section is open and
// it holds the wrapper's address.
struct held_lookup {
  static inline std::latch* inside = nullptr;
  static inline std::atomic<bool> hold{true};
};
struct holding_policy {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static bool try_acquire(void* w) noexcept {
    held_lookup::inside->count_down();
    while (held_lookup::hold.load()) std::this_thread::yield();  // released by the test
    return !static_cast<weak_ref*>(w)->cleared.load();
  }
  static void release(void*) noexcept {}
};

}  // namespace

TEST_CASE_TEMPLATE("host cache: sweep_concurrently() removes exactly the entries is_alive finds dead, and says which",
                   P, weak_policy<host_reclamation::grace_period>, weak_policy<host_reclamation::host_lock>) {
  host_identity_cache<P> cache;
  constexpr int n = 1000;  // several sweep batches, and table growth
  std::vector<std::unique_ptr<weak_ref>> refs;
  for (int i = 0; i < n; ++i) {
    refs.push_back(std::make_unique<weak_ref>());
    REQUIRE(cache.insert(id_of(i), refs.back().get()).inserted);
  }
  for (int i = 0; i < n; i += 3) refs[i]->cleared = true;  // the collector's verdict
  std::vector<void*> dead;
  const std::size_t removed = cache.sweep_concurrently(collecting_liveness{&dead});
  const std::size_t expected = (n + 2) / 3;
  CHECK(removed == expected);
  CHECK(dead.size() == expected);
  CHECK(cache.counters().entries == n - expected);
  CHECK(cache.counters().swept == expected);
  for (int i = 0; i < n; ++i) {
    if (i % 3 == 0)
      CHECK(cache.find(id_of(i)) == nullptr);
    else
      CHECK(cache.try_get(id_of(i)) == refs[i].get());
  }
  // A second sweep finds nothing new: each dead wrapper is handed over once.
  dead.clear();
  CHECK(cache.sweep_concurrently(collecting_liveness{&dead}) == 0);
  CHECK(dead.empty());
  // Their identities are wrapped again, in the slots they left.
  weak_ref again;
  CHECK(cache.insert(id_of(0), &again).inserted);
  CHECK(cache.try_get(id_of(0)) == &again);
}

TEST_CASE_TEMPLATE("host cache: an insert that takes over a dying wrapper's entry returns it as `replaced`", P,
                   weak_policy<host_reclamation::grace_period>, weak_policy<host_reclamation::host_lock>) {
  host_identity_cache<P> cache;
  weak_ref first;
  const host_entry made = cache.insert(id_of(1), &first);
  CHECK(made.inserted);
  CHECK(made.replaced == nullptr);  // a new entry replaces nothing
  weak_ref rival;
  const host_entry lost = cache.insert(id_of(1), &rival);
  CHECK_FALSE(lost.inserted);  // the live wrapper stays
  CHECK(lost.wrapper == &first);
  CHECK(lost.replaced == nullptr);
  first.cleared = true;  // dying: cleared, not swept yet
  weak_ref second;
  const host_entry took = cache.get_or_create(id_of(1), [&](const void*) -> void* { return &second; });
  CHECK(took.inserted);
  CHECK(took.wrapper == &second);
  CHECK(took.replaced == &first);  // the host frees it: no sweep will see it again
  std::vector<void*> dead;
  CHECK(cache.sweep_concurrently(collecting_liveness{&dead}) == 0);
  CHECK(dead.empty());
  CHECK(cache.try_get(id_of(1)) == &second);
}

// A host's liveness test may fail (a JVM binding's allocation): the batches it finished stay
// removed and handed over, the failed one and the rest stay cached, and the next sweep hands
// those over, none twice.
TEST_CASE("host cache, grace_period: sweep_concurrently() whose is_alive throws on its second batch") {
  host_identity_cache<weak_policy<host_reclamation::grace_period>> cache;
  constexpr int n = 1000;  // several batches of 256
  std::vector<std::unique_ptr<weak_ref>> refs;
  for (int i = 0; i < n; ++i) {
    refs.push_back(std::make_unique<weak_ref>());
    refs.back()->cleared = true;
    REQUIRE(cache.insert(id_of(i), refs.back().get()).inserted);
  }
  std::vector<void*> dead;
  int calls = 0;
  auto failing_second = [&](std::span<void* const> wrappers, std::span<bool> alive) {
    if (++calls == 2) throw std::bad_alloc();
    collecting_liveness{&dead}(wrappers, alive);
  };
  CHECK_THROWS_AS(cache.sweep_concurrently(failing_second), std::bad_alloc);
  REQUIRE_FALSE(dead.empty());
  CHECK(cache.counters().entries == n - dead.size());
  CHECK(cache.counters().swept == dead.size());
  const std::size_t first = dead.size();
  CHECK(cache.sweep_concurrently(collecting_liveness{&dead}) == n - first);
  CHECK(cache.counters().entries == 0);
  std::set<void*> distinct(dead.begin(), dead.end());
  CHECK(distinct.size() == static_cast<std::size_t>(n));  // each once
  CHECK(dead.size() == static_cast<std::size_t>(n));
}

// The interleaving the host's grace period exists for: a lookup found the wrapper and is inside
// try_acquire (its read section open) when the sweep removes the entry. The sweep does not wait
// for it (lookups take no lock); the host waits (synchronize(), or gc::retire) before freeing,
// and that wait returns only after the lookup let go. Under ASan, a free that did not wait
// would be reported as the held lookup reads the wrapper.
TEST_CASE("host cache, grace_period: sweep_concurrently() beside a lookup held inside try_acquire on a wrapper it "
          "removes") {
  std::latch entered(1);
  held_lookup::inside = &entered;
  held_lookup::hold = true;
  host_identity_cache<holding_policy> cache;
  auto* w = new weak_ref;
  REQUIRE(cache.insert(id_of(7), w).inserted);
  void* got = w;
  std::thread reader([&] { got = cache.try_get(id_of(7)); });
  entered.wait();
  w->cleared = true;
  std::vector<void*> dead;
  CHECK(cache.sweep_concurrently(collecting_liveness{&dead}) == 1);  // returns with the reader held
  REQUIRE(dead.size() == 1);
  CHECK(dead[0] == w);
  // The host frees what the sweep handed it after a grace period: synchronize() must wait for
  // the held lookup. The hook lets the lookup go only once the wait found it inside.
  struct release_when_waited {
    static void hook(void*) noexcept { held_lookup::hold = false; }
  };
  palrt::gc::internal::reader_wait_access::on_wait(&release_when_waited::hook, nullptr);
  cache.synchronize();
  palrt::gc::internal::reader_wait_access::on_wait(nullptr, nullptr);
  CHECK_FALSE(held_lookup::hold.load());  // the wait did find the lookup inside
  reader.join();                          // it read the wrapper (cleared) before this free
  delete static_cast<weak_ref*>(dead[0]);
  CHECK(got == nullptr);
}

// Threads wrapping identities again and again while a "collector" clears references and a
// sweeper sweeps: every wrapper the cache stops holding reaches the host exactly once, either
// through the sweep or through an insert's `replaced`. (That a lookup never hands out a
// cleared wrapper is the policy's try_acquire, tested with the dying wrappers.)
TEST_CASE("host cache, grace_period: sweep_concurrently() racing inserts and lookups on two threads loses and "
          "duplicates nothing") {
  host_identity_cache<weak_policy<host_reclamation::grace_period>> cache;
  // Enough identities that a sweep takes several batches per bucket and the tables grow (and
  // are compacted) under it: the walk that starts over on a replaced table is raced too.
  constexpr int identities = 2048;
  constexpr int rounds = 60;
  std::mutex lock;
  std::vector<std::unique_ptr<weak_ref>> made;  // every wrapper made, kept until the end
  std::map<void*, int> handed_back;             // wrapper -> times the cache handed it back
  std::vector<void*> cached;                    // wrappers an insert cached
  std::atomic<bool> done{false};

  auto mutator = [&](int seed) {
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < identities; k += 1 + (r + seed) % 3) {
        const void* id = id_of(k);
        if (void* hit = cache.try_get(id)) {
          // The "collector" of this test: a hit's wrapper dies at once, half of the time.
          if ((k + r) % 2 == 0) static_cast<weak_ref*>(hit)->cleared = true;
          continue;
        }
        weak_ref* fresh;
        {
          std::lock_guard<std::mutex> g(lock);
          made.push_back(std::make_unique<weak_ref>());
          fresh = made.back().get();
        }
        const host_entry e = cache.insert(id, fresh);
        std::lock_guard<std::mutex> g(lock);
        if (e.inserted) cached.push_back(fresh);
        if (e.replaced) ++handed_back[e.replaced];
      }
    }
  };
  std::thread sweeper([&] {
    std::vector<void*> dead;
    while (!done.load()) {
      dead.clear();
      cache.sweep_concurrently(collecting_liveness{&dead});
      std::lock_guard<std::mutex> g(lock);
      for (void* w : dead) ++handed_back[w];
    }
  });
  std::thread a(mutator, 0);
  std::thread b(mutator, 1);
  a.join();
  b.join();
  done = true;
  sweeper.join();
  // The end: every wrapper dies, and one last sweep hands the rest back.
  for (void* w : cached) static_cast<weak_ref*>(w)->cleared = true;
  std::vector<void*> dead;
  cache.sweep_concurrently(collecting_liveness{&dead});
  for (void* w : dead) ++handed_back[w];

  long lost = 0;
  long duplicated = 0;
  for (void* w : cached) {
    const auto it = handed_back.find(w);
    if (it == handed_back.end())
      ++lost;
    else if (it->second > 1)
      duplicated += it->second - 1;
  }
  const std::set<void*> cached_set(cached.begin(), cached.end());
  long foreign = 0;  // handed back but never cached
  for (const auto& [w, times] : handed_back)
    if (!cached_set.count(w)) foreign += times;
  INFO("cached " << cached.size() << ", handed back " << handed_back.size() << ", tables rebuilt "
                 << cache.counters().rebuilds);
  CHECK(lost == 0);
  CHECK(duplicated == 0);
  CHECK(foreign == 0);
  CHECK(cache.counters().entries == 0);
}

TEST_CASE("host cache, grace_period: sweep_concurrently() in a fork()ed child throws, the parent's cache untouched") {
  host_identity_cache<weak_policy<host_reclamation::grace_period>> cache;
  weak_ref w;
  w.cleared = true;
  REQUIRE(cache.insert(id_of(3), &w).inserted);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      std::vector<void*> dead;
      cache.sweep_concurrently(collecting_liveness{&dead});
    } catch (const palrt::pal::forked_child_error&) {
      status = 0;
    }
    _exit(status);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::vector<void*> dead;
  CHECK(cache.sweep_concurrently(collecting_liveness{&dead}) == 1);
}

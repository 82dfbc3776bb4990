// SPDX-License-Identifier: MIT
// What hosts like a JVM or a Lua interpreter need of the host-mode identity cache
// (palrt/interop/host_identity_cache.hpp): a policy with state of its own and a per-call
// context (a JNIEnv is per thread), dying wrappers (the host's weak reference cleared, its
// finalizer not run yet), and the end of the runtime (close(): which calls stay valid, and
// that a lookup in progress is waited for, held at its worst point).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <functional>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/gc/retire.hpp"
#include "palrt/interop/host_identity_cache.hpp"
#include "palrt/pal/fork.hpp"

using palrt::interop::host_cache_closed;
using palrt::interop::host_cache_options;
using palrt::interop::host_entry;
using palrt::interop::host_identity_cache;
using palrt::interop::host_reclamation;
using palrt::interop::host_token;

namespace {

const void* id_of(std::uintptr_t i) { return reinterpret_cast<const void*>(0x20000 + 16 * i); }

// A host whose wrappers are reached through weak references of its runtime (a JVM's weak
// global references; a Lua registry's weak table): the collector clears the reference first,
// and the wrapper's finalizer runs later.
struct weak_ref {
  explicit weak_ref(const void* id) : identity(id) {}
  const void* identity;
  std::atomic<bool> cleared{false};
};

// The runtime a policy needs to reach (a JavaVM, a lua_State): counts what its calls saw.
struct runtime {
  std::atomic<int> acquired{0};
  std::atomic<int> refused{0};
  std::atomic<int> released{0};
};

// A per-call context, as a JNIEnv* is: the calling thread's view of the runtime, and where
// try_acquire leaves the strong reference it made (NewLocalRef's result).
struct call {
  runtime* rt;
  std::thread::id thread = std::this_thread::get_id();
  const weak_ref* strong = nullptr;
};

template <host_reclamation R>
struct contextual_policy {
  static constexpr host_reclamation reclamation = R;
  using context = call*;
  runtime* rt;  // the policy's own state, one per cache
  bool try_acquire(call* c, void* w) const noexcept {
    // The context is the calling thread's own (a JNIEnv must not cross threads).
    if (c->rt != rt || c->thread != std::this_thread::get_id()) return false;
    auto* ref = static_cast<weak_ref*>(w);
    if (ref->cleared.load(std::memory_order_acquire)) {
      rt->refused.fetch_add(1);
      return false;
    }
    c->strong = ref;
    rt->acquired.fetch_add(1);
    return true;
  }
  void release(call* c, void* w) const noexcept {
    (void)w;
    c->rt->released.fetch_add(1);
  }
};

// A policy with state and no context (a Lua host: the lua_State of its interpreter).
struct stateful_policy {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  const std::atomic<bool>* interpreter_alive;
  bool try_acquire(void* w) const noexcept {
    return interpreter_alive->load() && !static_cast<weak_ref*>(w)->cleared.load();
  }
  void release(void*) const noexcept {}
};

struct static_policy {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static bool try_acquire(void* w) noexcept { return !static_cast<weak_ref*>(w)->cleared.load(); }
  static void release(void*) noexcept {}
};

// The forms a policy may take, and the forms it may not (the cache says which it wants).
struct no_release {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static bool try_acquire(void*) noexcept { return true; }
};
struct throwing_acquire {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  bool try_acquire(void*) const { return true; }
  void release(void*) const noexcept {}
};
struct non_const_acquire {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  bool try_acquire(void*) noexcept { return true; }
  void release(void*) noexcept {}
};
struct context_without_it {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  using context = call*;
  static bool try_acquire(void*) noexcept { return true; }
  static void release(void*) noexcept {}
};
static_assert(palrt::interop::detail::host_policy_without_context<static_policy>);
static_assert(palrt::interop::detail::host_policy_without_context<stateful_policy>);
static_assert(palrt::interop::detail::host_policy_with_context<contextual_policy<host_reclamation::grace_period>>);
static_assert(!palrt::interop::detail::host_policy_without_context<no_release>);
static_assert(!palrt::interop::detail::host_policy_without_context<throwing_acquire>);
static_assert(!palrt::interop::detail::host_policy_without_context<non_const_acquire>);
static_assert(!palrt::interop::detail::host_policy_with_context<context_without_it>);

// A policy with a context is called with one, and one without is called without.
template <class C>
concept takes_context_calls = requires(C& c, typename C::context x, const void* id, void* w) {
  c.try_get(x, id);
  c.insert(x, id, w);
};
template <class C>
concept takes_plain_calls = requires(C& c, const void* id, void* w) {
  c.try_get(id);
  c.insert(id, w);
};
using contextual_cache = host_identity_cache<contextual_policy<host_reclamation::grace_period>>;
static_assert(takes_context_calls<contextual_cache> && !takes_plain_calls<contextual_cache>);
static_assert(takes_plain_calls<host_identity_cache<static_policy>>);
static_assert(!takes_context_calls<host_identity_cache<static_policy>>);
// An empty policy adds nothing to the cache.
static_assert(sizeof(host_identity_cache<static_policy>) ==
              sizeof(host_identity_cache<stateful_policy>) - sizeof(void*));

// A policy that holds the thread calling try_acquire until the test lets it go: a lookup
// stopped at its worst point (its read section open, the wrapper's address in hand).
struct held_lookup {
  static inline std::latch* inside = nullptr;
  static inline std::atomic<bool> hold{true};
  static inline std::atomic<bool> close_returned{false};
  static inline std::atomic<int> acquires_after_close{0};
  // The next try_acquire counts `entered` down and waits until the test clears `hold`.
  static void arm(std::latch& entered) {
    inside = &entered;
    hold = true;
    close_returned = false;
    acquires_after_close = 0;
  }
};
struct holding_policy {
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static bool try_acquire(void* w) noexcept {
    held_lookup::inside->count_down();
    while (held_lookup::hold.load()) std::this_thread::yield();  // released by the test
    if (held_lookup::close_returned.load()) held_lookup::acquires_after_close.fetch_add(1);
    return !static_cast<weak_ref*>(w)->cleared.load();
  }
  static void release(void*) noexcept {}
};

// Counts the policy calls made after close() returned.
struct watching_policy {
  static inline std::atomic<bool> closed_returned{false};
  static inline std::atomic<long> calls_after{0};
  static constexpr host_reclamation reclamation = host_reclamation::grace_period;
  static bool try_acquire(void* w) noexcept {
    if (closed_returned.load(std::memory_order_relaxed)) calls_after.fetch_add(1);
    return !static_cast<weak_ref*>(w)->cleared.load(std::memory_order_relaxed);
  }
  static void release(void*) noexcept {}
};

}  // namespace

TEST_CASE_TEMPLATE("host cache: a policy with state and a per-call context gets both, on the caller's thread", P,
                   contextual_policy<host_reclamation::grace_period>, contextual_policy<host_reclamation::host_lock>) {
  runtime rt;
  host_identity_cache<P> cache(P{&rt}, host_cache_options{1});
  CHECK(cache.policy().rt == &rt);
  weak_ref a(id_of(1));
  call mine{&rt};
  const host_entry e = cache.get_or_create(&mine, id_of(1), [&](const void*) -> void* { return &a; });
  CHECK(e.inserted);
  // A hit acquires through the caller's context: the strong reference lands there.
  call hit{&rt};
  CHECK(cache.try_get(&hit, id_of(1)) == &a);
  CHECK(hit.strong == &a);
  // Another thread's lookups use its own context (host_lock: one at a time, as under a lock).
  std::thread other([&] {
    call theirs{&rt};
    CHECK(cache.try_get(&theirs, id_of(1)) == &a);
    CHECK(theirs.strong == &a);
    weak_ref b(id_of(1));
    const host_entry again = cache.insert(&theirs, id_of(1), &b);  // the live one wins
    CHECK_FALSE(again.inserted);
    CHECK(again.wrapper == &a);
  });
  other.join();
  CHECK(rt.acquired == 3);
  CHECK(rt.refused == 0);
  // A lost race releases the factory's wrapper through the caller's context.
  weak_ref loser(id_of(2));
  weak_ref winner(id_of(2));
  const host_entry lost = cache.get_or_create(&mine, id_of(2), [&](const void*) -> void* {
    CHECK(cache.insert(&mine, id_of(2), &winner).inserted);  // cached meanwhile
    return &loser;
  });
  CHECK_FALSE(lost.inserted);
  CHECK(lost.wrapper == &winner);
  CHECK(rt.released == 1);
}

TEST_CASE("host cache: a policy with state and no context (an interpreter's)") {
  std::atomic<bool> alive{true};
  host_identity_cache<stateful_policy> cache(stateful_policy{&alive});
  weak_ref a(id_of(3));
  CHECK(cache.insert(id_of(3), &a).inserted);
  CHECK(cache.try_get(id_of(3)) == &a);
  alive = false;  // the policy reads its own state
  CHECK(cache.try_get(id_of(3)) == nullptr);
}

// The JVM's and Lua's order: the weak reference is cleared, the finalizer runs later. In
// between, the wrapper is dying: lookups must not hand it out, a new wrapper replaces it, and
// the dying one's finalizer, erasing by its token, leaves the new entry alone.
TEST_CASE_TEMPLATE("host cache: a dying wrapper (weak reference cleared, finalizer pending) is replaced, and its "
                   "finalizer leaves the new entry",
                   P, contextual_policy<host_reclamation::grace_period>,
                   contextual_policy<host_reclamation::host_lock>) {
  runtime rt;
  host_identity_cache<P> cache(P{&rt});
  call c{&rt};
  weak_ref old_ref(id_of(4));
  const host_token old_token = cache.insert(&c, id_of(4), &old_ref).token;
  old_ref.cleared = true;  // the collector found the wrapper unreachable
  CHECK(cache.try_get(&c, id_of(4)) == nullptr);
  CHECK(cache.find(id_of(4)) == &old_ref);  // still cached: find() takes no reference
  weak_ref new_ref(id_of(4));
  int made = 0;
  const host_entry fresh = cache.get_or_create(&c, id_of(4), [&](const void*) -> void* {
    ++made;
    return &new_ref;
  });
  CHECK(made == 1);
  CHECK(fresh.inserted);
  CHECK(cache.counters().dead_replaced == 1);
  // The dying wrapper's finalizer runs now.
  CHECK_FALSE(cache.erase(old_token));
  CHECK(cache.try_get(&c, id_of(4)) == &new_ref);
  CHECK(cache.counters().entries == 1);
  // Its own end removes it.
  new_ref.cleared = true;
  CHECK(cache.erase(fresh.token));
  CHECK(cache.counters().entries == 0);
}

TEST_CASE_TEMPLATE("host cache: after close() lookups miss, inserts throw before the factory, erase and sweep work on",
                   P, contextual_policy<host_reclamation::grace_period>,
                   contextual_policy<host_reclamation::host_lock>) {
  runtime rt;
  host_identity_cache<P> cache(P{&rt});
  call c{&rt};
  std::deque<weak_ref> refs;
  std::vector<host_token> tokens;
  for (std::uintptr_t i = 0; i < 40; ++i) {
    refs.emplace_back(id_of(100 + i));
    tokens.push_back(cache.insert(&c, id_of(100 + i), &refs.back()).token);
  }
  CHECK_FALSE(cache.closed());
  cache.close();
  CHECK(cache.closed());
  cache.close();  // idempotent
  const int acquired_before = rt.acquired;
  CHECK(cache.try_get(&c, id_of(100)) == nullptr);
  CHECK(cache.find(id_of(100)) == nullptr);
  CHECK(rt.acquired == acquired_before);  // no call into the runtime any more
  int made = 0;
  CHECK_THROWS_AS((void)cache.get_or_create(&c, id_of(100),
                                            [&](const void*) -> void* {
                                              ++made;
                                              return &refs[0];
                                            }),
                  host_cache_closed);
  CHECK(made == 0);
  weak_ref late(id_of(7));
  CHECK_THROWS_WITH_AS((void)cache.insert(&c, id_of(7), &late), doctest::Contains("insert: the cache was closed"),
                       host_cache_closed);
  // The finalizers that run after the end still find their entries (none is left behind to
  // be used after the runtime frees it) ...
  for (std::size_t i = 0; i < 20; ++i) CHECK(cache.erase(tokens[i]));
  CHECK_FALSE(cache.erase(tokens[0]));  // ... once each
  // ... and a collector's last sweep works too.
  for (std::size_t i = 20; i < 30; ++i) refs[i].cleared = true;
  CHECK(cache.sweep([](std::span<void* const> ws, std::span<bool> alive) {
    for (std::size_t k = 0; k < ws.size(); ++k) alive[k] = !static_cast<weak_ref*>(ws[k])->cleared.load();
  }) == 10);
  const auto counters = cache.counters();
  CHECK(counters.entries == 10);
  CHECK(counters.erased == 20);
  CHECK(counters.swept == 10);
}

// The interleaving close() exists for: a lookup found a wrapper and is inside try_acquire
// (about to make a strong reference from the weak one) when the runtime ends. close() must not
// return before that call has returned: the runtime may be gone right after.
TEST_CASE("host cache, grace_period: close() waits for a lookup held inside try_acquire") {
  std::latch entered(1);
  held_lookup::arm(entered);
  host_identity_cache<holding_policy> cache;
  weak_ref a(id_of(9));
  (void)cache.insert(id_of(9), &a);
  void* got = nullptr;
  std::thread reader([&] { got = cache.try_get(id_of(9)); });
  entered.wait();  // the reader is inside try_acquire, its read section open
  std::atomic<bool> waiting{false};
  palrt::gc::internal::reader_wait_access::on_wait(
      [](void* flag) noexcept { static_cast<std::atomic<bool>*>(flag)->store(true); }, &waiting);
  std::latch closing(1);
  std::thread closer([&] {
    closing.count_down();
    cache.close();
    held_lookup::close_returned = true;
  });
  closing.wait();
  // Until close() is waiting for the reader (it found the reader's section open), or returned
  // without waiting: the failure this test exists for.
  while (!waiting.load() && !held_lookup::close_returned.load()) std::this_thread::yield();
  CHECK_FALSE(held_lookup::close_returned.load());
  palrt::gc::internal::reader_wait_access::on_wait(nullptr, nullptr);
  held_lookup::hold = false;
  reader.join();
  closer.join();
  CHECK(held_lookup::close_returned.load());
  CHECK(held_lookup::acquires_after_close == 0);
  CHECK(got == &a);  // it began before the close: it completes
  CHECK(cache.try_get(id_of(9)) == nullptr);
}

TEST_CASE("host cache, grace_period: close() and synchronize() inside a read section refuse to wait for themselves") {
  host_identity_cache<static_policy> cache;
  {
    palrt::gc::read_section section;
    CHECK_THROWS_WITH_AS(cache.synchronize(), doctest::Contains("inside a read section"), std::logic_error);
    CHECK_THROWS_WITH_AS(cache.close(), doctest::Contains("inside a read section"), std::logic_error);
  }
  cache.close();  // the flag was set; the wait completes outside
  CHECK(cache.closed());
}

// synchronize(): the way to free a wrapper at once when it cannot be retired. A lookup that
// found it before the erase is waited for.
TEST_CASE("host cache, grace_period: synchronize() returns only after a lookup that found an erased wrapper") {
  std::latch entered(1);
  held_lookup::arm(entered);
  host_identity_cache<holding_policy> cache;
  auto* w = new weak_ref(id_of(11));
  const host_token token = cache.insert(id_of(11), w).token;
  void* got = w;
  std::thread reader([&] { got = cache.try_get(id_of(11)); });
  entered.wait();
  w->cleared = true;
  CHECK(cache.erase(token));
  std::atomic<bool> freed{false};
  std::thread freer([&] {
    cache.synchronize();
    // At once: no lookup can still hold it. Were the reader still held, it would read freed
    // memory below (ASan reports it).
    delete w;
    freed = true;
  });
  held_lookup::hold = false;
  reader.join();
  freer.join();
  CHECK(freed.load());
  CHECK(got == nullptr);
}

// Many threads looking up and inserting while another closes: every call either completes as
// before or sees the cache closed; none calls the policy after close() returned.
TEST_CASE("host cache, grace_period: close() racing lookups and inserts on four threads") {
  watching_policy::closed_returned = false;
  watching_policy::calls_after = 0;
  host_identity_cache<watching_policy> cache;
  std::vector<std::unique_ptr<weak_ref>> refs;
  for (std::uintptr_t i = 0; i < 256; ++i) refs.push_back(std::make_unique<weak_ref>(id_of(1000 + i)));
  for (std::uintptr_t i = 0; i < 128; ++i) (void)cache.insert(id_of(1000 + i), refs[i].get());
  std::latch start(5);
  std::atomic<long> closed_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (std::uintptr_t k = 0; k < 20000 && !watching_policy::closed_returned.load(); ++k) {
        const std::uintptr_t i = (k * 7 + static_cast<std::uintptr_t>(t)) % 256;
        if (void* w = cache.try_get(id_of(1000 + i))) CHECK(w == refs[i].get());
        try {
          const host_entry e = cache.insert(id_of(1000 + i), refs[i].get());
          CHECK(e.wrapper == refs[i].get());
        } catch (const host_cache_closed&) {
          closed_seen.fetch_add(1);
        }
      }
    });
  start.arrive_and_wait();
  cache.close();
  watching_policy::closed_returned = true;
  for (auto& t : threads) t.join();
  CHECK(watching_policy::calls_after == 0);
  CHECK(cache.try_get(id_of(1000)) == nullptr);
  MESSAGE("inserts that saw the cache closed: " << closed_seen.load());
}

// A fork()ed child of a process with a cache (pal/fork.hpp): close() in the child takes no
// lock a parent's thread may have held, and the child's calls then behave as after close().
TEST_CASE("host cache, grace_period: close() in a fork()ed child while a parent's thread held a bucket's lock") {
  host_identity_cache<static_policy> cache(host_cache_options{1});
  weak_ref a(id_of(12));
  (void)cache.insert(id_of(12), &a);
  // A parent's thread inside an insert, holding the only bucket's lock, at fork().
  std::latch in_factory(1), may_finish(1);
  std::thread writer([&] {
    weak_ref b(id_of(13));
    try {
      (void)cache.get_or_create(id_of(13), [&](const void*) -> void* {
        in_factory.count_down();
        may_finish.wait();
        return &b;
      });
    } catch (...) {
    }
  });
  in_factory.wait();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int bad = 0;
    cache.close();
    if (!cache.closed()) bad |= 1;
    if (cache.try_get(id_of(12)) != nullptr) bad |= 2;
    try {
      (void)cache.insert(id_of(14), &a);
      bad |= 4;
    } catch (const host_cache_closed&) {
    } catch (const palrt::pal::forked_child_error&) {
    }
    ::_exit(bad);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  may_finish.count_down();
  writer.join();
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

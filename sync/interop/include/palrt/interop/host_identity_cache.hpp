// SPDX-License-Identifier: MIT
// palrt::interop::host_identity_cache: the identity cache for a runtime with a collector of
// its own (the host mode). Native identity pointer -> the host's wrapper object for it, where
// the wrapper is the host's own object (an opaque pointer: a PyObject*, a Boehm-allocated
// object, a JNI weak global) and no palrt object, record or handle stands beside it.
//
// Example (a host whose wrappers are reference-counted objects of its own):
//   struct host_wrapper { std::atomic<long> count{1}; const void* native; };
//   struct host_policy {
//     static constexpr host_reclamation reclamation = host_reclamation::grace_period;
//     static bool try_acquire(void* w) noexcept {    // a reference, unless it is being destroyed
//       auto& c = static_cast<host_wrapper*>(w)->count;
//       for (long n = c.load(); n > 0;)
//         if (c.compare_exchange_weak(n, n + 1)) return true;
//       return false;
//     }
//     static void release(void* w) noexcept { static_cast<host_wrapper*>(w)->count.fetch_sub(1); }
//   };
//   host_identity_cache<host_policy> cache;
//   host_entry e = cache.get_or_create(native, [](const void* id) -> void* {
//     return new host_wrapper{{1}, id};               // the host's factory: a new reference
//   });
//   // ... and where the host destroys the wrapper (its count reached zero): erase its entry,
//   // then free it after a grace period, never at once (see "Freeing a wrapper" below):
//   cache.erase(e.token);
//   palrt::gc::retire(e.wrapper, [](void* w) noexcept { delete static_cast<host_wrapper*>(w); });
//
// The policy says how the cache treats the host's objects:
//   static constexpr host_reclamation reclamation;   // see below
//   bool try_acquire(void* wrapper) const noexcept;  // take a reference to a wrapper the
//                                                    // cache found, or false if it may no
//                                                    // longer be handed out (being destroyed,
//                                                    // or dying: see "Dying wrappers")
//   void release(void* wrapper) const noexcept;      // drop the reference to a factory's
//                                                    // wrapper that lost a race
// The two may be static members (the host's state is global: CPython under the GIL, Boehm),
// or const members of a policy object with state of its own, given to the constructor and
// kept by the cache: a lua_State for the interpreter a cache belongs to, a JavaVM. And a
// policy may ask for a per-call context, for what belongs to the calling thread and not to
// the cache (a JNIEnv is valid on its own thread only):
//   using context = C;                                      // small, copied per call
//   bool try_acquire(C context, void* wrapper) const noexcept;
//   void release(C context, void* wrapper) const noexcept;
// Then try_get(), insert() and get_or_create() take the caller's context first and hand it
// to the policy, on the caller's thread; the context is also where try_acquire() returns
// what it made, when the reference it takes is not the wrapper pointer itself (a JVM's
// NewLocalRef: palrt/jni/identity_cache.hpp uses `using context = call*`). Other members need
// none. CPython (under the GIL): Py_INCREF unless the count is zero / Py_DECREF. Boehm: the
// pointer itself is the reference (true / nothing). A JVM: NewLocalRef of the weak global
// reference, non-null / DeleteWeakGlobalRef of one never cached. Both run with the bucket's
// writer lock held on a miss (grace_period): they must not call into this cache.
//
// Dying wrappers. Runtimes with weak references clear them before they finalize (a JVM's
// weak global references before its Cleaner actions run, Lua's weak tables before __gc): in
// between, the wrapper is dying, still cached, and must not be handed out. try_acquire()
// refuses it (NewLocalRef returns null; a Lua host finds its weak table's slot empty), and
// then: try_get() misses; get_or_create() makes a new wrapper that replaces the dying one in
// its entry (counters().dead_replaced); the dying wrapper's finalizer, erasing by its token,
// finds the identity mapped to the new wrapper and leaves it (erase() is false), and frees
// its own reference as usual. Nothing else is needed from the host: the token names the
// mapping, not the identity.
//
// The end of a runtime. When the runtime ends (JVM shutdown, lua_close), its finalizers run
// in no useful order, and the objects a policy reaches may be freed right after. close()
// marks that point: afterwards try_get() and find() return null and call nothing,
// insert() and get_or_create() throw host_cache_closed (before the factory), and erase(),
// sweep(), counters() and the destructor work as before, so a finalizer that runs late still
// erases its own entry, once, and frees its own reference, once. close() returns when no
// lookup or insert that began before it is still running (grace_period: it waits for them),
// so after close() returns the host may free what try_acquire() would touch. The cache itself
// must outlive every call, the late finalizers' erase() included: keep it where the
// runtime's end cannot free it before them (a JNI library's cache made in JNI_OnLoad lives
// until the process exits; a Lua host frees it after lua_close() returned).
//
// Reclamation, chosen by the policy:
// - grace_period: any thread, at any time. A hit writes no shared cache line: a read section
//   (palrt/gc/read_section.hpp, two stores to the caller's own line), the probe, and a
//   per-table sequence read before and after it (a seqlock: a reader that overlapped a writer
//   of its bucket probes again, or asks under the lock if the writer is still at it). Writers
//   take their bucket's lock; a replaced table is freed after a grace period, one
//   process-wide barrier per batch of tables.
// - host_lock: the host serialises every call on the cache, hits included, with a lock of its
//   own (CPython's GIL). No read section, no lock, no barrier: a hit is the hash and the probe,
//   a replaced table is freed at once.
//
// Entries and tokens. The cache holds its wrappers weakly: it takes no reference, and an
// entry lives until the host removes it, in one of two ways:
// - synchronously, by token: insert() and get_or_create() return the entry's token, the pair
//   (identity, wrapper), and erase(token) removes the entry only if it still maps that
//   identity to that wrapper. A newer entry for the identity (another wrapper) is never
//   removed by an old token. The host calls it where its wrapper dies: tp_dealloc, a
//   finalizer, an eviction. The one rule: a wrapper's memory must not become another wrapper
//   of the same identity before its token was erased (or its entry swept); tp_dealloc that
//   erases before freeing, and a tracing collector that reclaims only after its sweep, keep
//   it.
// - by a sweep, for a tracing collector: sweep(is_alive) hands the host's liveness test the
//   cache's wrappers in batches (one call per up to 256 wrappers, not one per entry) and
//   removes the entries of those it finds dead. It walks only this cache's entries. Call it
//   where the collector knows what is marked and before anything dead can be reclaimed or
//   finalized, that is, with the weak-short sweep of palrt's handle table: Boehm's
//   GC_EVENT_MARK_END, with the world stopped. Entries are weak-short:
//   a wrapper found dead is gone from the cache before its finalizer runs, so a finalizer
//   that erases its token then finds nothing; and a lookup never hands out a wrapper the
//   collector has found dead.
// With grace_period, sweep() takes no lock and allocates nothing, so it may run with the world
// stopped while any thread is stopped anywhere inside the cache (a stopped writer in the middle
// of an insert or a rebuild included: host_identity_map.cpp has the protocol). It must run
// either with the world stopped or while no other thread uses the cache. With host_lock, it
// runs under the host's lock like every other call.
// - by a sweep with the world running, for a host whose collector clears weak references and
//   cannot stop the world for it (a JVM binding): sweep_concurrently(is_alive) takes each
//   bucket's lock in turn while lookups go on, and the host frees what it found dead after a
//   grace period. Such a host has no per-wrapper step at all: a dying wrapper whose entry a
//   new one took over comes back in host_entry::replaced, to free the same way. A JVM binding
//   saves a Java object per wrapper (the cleanup a token-erasing binding registers) and the
//   JVM's reference processing of it (palrt/jni/identity_cache.hpp).
//
// Freeing a wrapper (grace_period). A try_get() on another thread may have found a wrapper in
// the table just before the host erased it, and be calling try_acquire() on it now: the read
// section it probes in keeps the table alive, not the wrapper. So the host frees a wrapper
// the cache may have handed to try_acquire() only after a grace period since its erase (or
// its sweep): palrt::gc::retire(wrapper, reclaim) (palrt/gc/retire.hpp) calls reclaim once
// every read section open at the call has closed, in batches (a few tens of nanoseconds per
// wrapper). Until then try_acquire() may be called on it and must refuse it (its count is
// zero), reading only memory the host has not freed. Hosts that never free a wrapper under
// a reader need nothing: a tracing collector that finds the wrappers a stopped thread holds
// in its registers and stack (Boehm: the reader holds the pointer, so it is marked), or a
// host_lock host (its lock excludes every try_get()). A JVM's weak global reference is
// deleted the same way: retire(ref, fn) where fn calls DeleteWeakGlobalRef.
//
// Removal and memory. host_lock: an erased or swept entry leaves no trace (the entries after
// it in its cluster move back over it), so a lookup that misses stops at the first empty slot
// of a short cluster however much churn came before, and an insert after an erase takes an
// empty slot and rebuilds nothing; a table an erase leaves 1/8 full is replaced by one half
// full, so dropping every wrapper gives the memory back (down to one 8-slot table per
// bucket). grace_period (readers probe while writers write): an erased or swept entry leaves
// a tombstone that the next insert on its probe path takes, so churn (a wrapper dropped and
// its identity wrapped again) writes a slot and rebuilds nothing; a table is rebuilt only when
// keys and tombstones fill 3/4 of it, and the rebuild drops the tombstones and sizes the
// table for its keys. Memory: 16 bytes per slot, up to 3/4 full.
//
// Misses: get_or_create() calls the factory with no lock held (it may run host code, release
// the host's lock, and even call this cache again). When the identity was cached meanwhile,
// the first wrapper wins: the caller gets it (acquired), and the factory's wrapper is
// released (Policy::release). An entry whose wrapper try_acquire() refuses (being destroyed,
// its token not erased yet) is replaced by the new wrapper.
//
// Identities: any pointer value but null and ~0 (all bits set), which mark empty and removed
// slots (identity_cache.hpp, "Identities"): for them try_get() and find() return null,
// erase() returns false, insert() and get_or_create() throw std::invalid_argument naming
// which one it was, before calling the factory.
//
// Thread safety: grace_period: every member from any thread concurrently, sweep() as above,
// sweep_concurrently() too.
// host_lock: every call under the host's lock. Lifetime: the cache must outlive its use; an
// erase() from a wrapper that dies after the cache was destroyed is undefined, so a host
// keeps the cache alive while any wrapper it cached may still die (a module-level object the
// wrappers hold, or one never destroyed).
//
// After fork() (palrt/pal/fork.hpp): host_lock takes no lock: the child's copy works as the
// parent's did (the host's own lock is the host's business; CPython re-initialises the GIL).
// grace_period: a cache made before fork() is the parent's in the child, and another thread
// may have held one of its locks: hits work (a hit that would need the lock misses), sweep()
// works; insert() and get_or_create() throw pal::forked_child_error before calling the factory,
// erase() returns false, counters() throws pal::forked_child_error.
//
// Costs (order of magnitude; measured figures and their machine in docs/BENCHMARKS.md, "Host-GC
// mode"): a hit is a hash and a probe of a few loads, ~10 ns in a loop over a thousand
// identities, with no shared write: host_lock adds nothing, grace_period a read section and two
// loads of the table's sequence. Beside the hosts' own maps, in the same run: under CPython's
// GIL, below a plain std::unordered_map and a tenth of pybind11's registered_instances; in a
// Boehm host, about half of a std::unordered_map of disappearing links read under Boehm's
// lock at one thread, and it scales with threads where that map serialises. An insert after
// an erase reuses a slot (churn rebuilds nothing); an entry costs 16 bytes of table at a load
// between 1/4 and 3/4.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "palrt/gc/read_section.hpp"
#include "palrt/gc/retire.hpp"  // how a grace_period host frees a wrapper
#include "palrt/interop/detail/host_fast_path.hpp"

namespace palrt::interop {

enum class host_reclamation : std::uint8_t { grace_period, host_lock };

// An entry's token: the mapping it names.
class host_token {
 public:
  host_token() noexcept = default;
  host_token(const void* identity, void* wrapper) noexcept : identity_(identity), wrapper_(wrapper) {}
  const void* identity() const noexcept { return identity_; }
  void* wrapper() const noexcept { return wrapper_; }
  explicit operator bool() const noexcept { return wrapper_ != nullptr; }
  friend bool operator==(const host_token&, const host_token&) noexcept = default;

 private:
  const void* identity_ = nullptr;
  void* wrapper_ = nullptr;
};

// What insert() and get_or_create() return: the identity's cached wrapper (a reference the
// caller owns: the one it passed in if `inserted`, otherwise one taken with try_acquire), and
// that entry's token.
struct host_entry {
  void* wrapper = nullptr;
  host_token token;
  bool inserted = false;  // false: another wrapper was cached already and is returned
  // inserted: the dying wrapper (try_acquire refused it) whose entry the new one took over,
  // else null. No longer in the cache, and never handed out again: a host whose dying
  // wrappers erase their own token (a finalizer) ignores it; a host with no such step (one
  // that sweeps: sweep_concurrently()) frees it here, after a grace period (grace_period).
  void* replaced = nullptr;
};

// Thrown by insert() and get_or_create() of a cache close() was called on; nothing was cached
// (get_or_create() did not call the factory).
class host_cache_closed : public std::logic_error {
 public:
  explicit host_cache_closed(const char* operation);
};

struct host_cache_options {
  // 0: RoundUpToPowerOf2(pal::processor_count()) buckets for grace_period, 1 for host_lock
  // (one lock serialises everything: more buckets would only cost memory); otherwise this
  // many, rounded up to a power of two (at most 4096).
  std::size_t buckets = 0;
};

// Relaxed snapshots, per bucket under its writer lock (grace_period).
struct host_cache_counters {
  std::size_t buckets = 0;
  std::size_t entries = 0;          // cached wrappers
  std::size_t tombstones = 0;       // removed entries whose slot waits for reuse
  std::size_t slots = 0;            // slots of all current tables
  std::size_t bytes = 0;            // memory of the current tables and the retired ones
  std::uint64_t inserted = 0;       // entries made by insert() and get_or_create()
  std::uint64_t races_lost = 0;     // inserts that found another live wrapper
  std::uint64_t dead_replaced = 0;  // entries replaced because try_acquire refused them
  std::uint64_t erased = 0;         // entries removed by erase()
  std::uint64_t swept = 0;          // entries removed by sweep()
  std::uint64_t reused_slots = 0;   // inserts that took a tombstone (grace_period: host_lock has none)
  std::uint64_t rebuilds = 0;       // tables replaced (grown, compacted or shrunk)
  std::size_t retired_tables = 0;   // replaced tables waiting for a grace period
};

namespace internal {
struct host_map_state;
class host_cache_access;
}  // namespace internal

namespace detail {

// The policy's call the out-of-line part makes: `policy` is the cache's Policy object,
// `context` the address of the call's context (null for a policy that takes none).
struct host_hooks {
  const void* policy;
  bool (*try_acquire)(const void* policy, void* context, void* wrapper) noexcept;
};

// What a policy declares (host_identity_cache.hpp, "The policy"): try_acquire/release on a
// const Policy (static members, or const ones for a policy with state), with the call's
// context first when it declares `using context = ...`.
// Unformatted: clang-format 14 breaks a compound requirement after its braces and writes
// `noexcept->` (fixed in 15).
// clang-format off
template <class P>
concept host_policy_without_context = requires(const P& p, void* w) {
  { p.try_acquire(w) } noexcept -> std::same_as<bool>;
  { p.release(w) } noexcept;
};
template <class P>
concept host_policy_with_context = requires(const P& p, typename P::context c, void* w) {
  { p.try_acquire(c, w) } noexcept -> std::same_as<bool>;
  { p.release(c, w) } noexcept;
};
// clang-format on
// A policy's context, or this for a policy that takes none (a type no caller can name).
struct no_host_context {
  explicit no_host_context() = default;
};
template <class P>
struct host_policy_context {
  using type = no_host_context;
};
template <class P>
  requires requires { typename P::context; }
struct host_policy_context<P> {
  using type = typename P::context;
};

using liveness_batch_fn = void (*)(void* context, std::span<void* const> wrappers, std::span<bool> alive);

// The cache without its policy: the map and its out-of-line paths (host_identity_map.cpp).
class host_map_core {
 public:
  host_map_core(host_reclamation reclamation, const host_cache_options& options, host_hooks hooks);
  host_map_core(const host_map_core&) = delete;
  host_map_core& operator=(const host_map_core&) = delete;
  ~host_map_core();

  // What lookups probe: the bucket tables, or after close() an array of nulls (every lookup
  // misses, with nothing to check on the hit path). relaxed: grace_period lookups load it
  // inside their read section, and close() waits for the sections open when it stored it;
  // host_lock: under the host's lock.
  bucket_view view() const noexcept { return {bucket_bits_, reader_tables_.load(std::memory_order_relaxed)}; }
  std::size_t bucket_count() const noexcept { return std::size_t{1} << bucket_bits_; }
  // `wrapper` owned by the caller; on a loss the winner, acquired (see host_entry).
  // `context`: passed to the policy's try_acquire. Throws host_cache_closed after close().
  host_entry insert(const void* identity, void* wrapper, const char* operation, void* context);
  bool erase(host_token token) noexcept;
  // The hit under the bucket's lock, acquired: for a reader that met a writer at work.
  void* try_get_locked(const void* identity, void* context) const noexcept;
  void close();
  void synchronize();
  bool closed() const noexcept { return closed_.load(std::memory_order_relaxed); }
  std::size_t sweep(void* context, liveness_batch_fn is_alive);
  std::size_t sweep_concurrently(void* context, liveness_batch_fn is_alive);
  host_cache_counters counters() const;
  [[noreturn]] static void throw_reserved(const char* operation, const void* identity);
  [[noreturn]] static void throw_no_wrapper(const char* operation);
  [[noreturn]] static void throw_closed(const char* operation);

 private:
  friend class internal::host_cache_access;
  std::unique_ptr<internal::host_map_state> state_;
  const unsigned bucket_bits_;
  std::atomic<std::atomic<bucket_table*>*> reader_tables_;  // see view()
  std::atomic<bool> closed_{false};                         // for the writers and closed(); lookups need no flag
};

}  // namespace detail

template <class Policy>
class host_identity_cache {
  static_assert(std::is_same_v<std::remove_cv_t<decltype(Policy::reclamation)>, host_reclamation>,
                "host_identity_cache<Policy>: Policy::reclamation must be a host_reclamation");
  static_assert(detail::host_policy_without_context<Policy> || detail::host_policy_with_context<Policy>,
                "host_identity_cache<Policy>: Policy needs `bool try_acquire(void*) const noexcept` and "
                "`void release(void*) const noexcept` (static or const members), or, with `using context = C;`, "
                "`bool try_acquire(C, void*) const noexcept` and `void release(C, void*) const noexcept`");
  static constexpr bool takes_context = detail::host_policy_with_context<Policy>;

 public:
  static constexpr host_reclamation reclamation = Policy::reclamation;
  // The policy's per-call context (Policy::context), passed first to try_get(), insert() and
  // get_or_create(); for a policy without one, a type that no call accepts.
  using context = typename detail::host_policy_context<Policy>::type;

  explicit host_identity_cache(host_cache_options options = {}) requires std::is_default_constructible_v<Policy>
      : host_identity_cache(Policy{}, options) {}
  // A policy with state of its own (the interpreter, the VM): kept for the cache's life,
  // its const members called from any thread.
  explicit host_identity_cache(Policy policy, host_cache_options options = {})
      : policy_(std::move(policy)), core_(reclamation, options, detail::host_hooks{&policy_, &try_acquire_hook}) {}
  host_identity_cache(const host_identity_cache&) = delete;
  host_identity_cache& operator=(const host_identity_cache&) = delete;

  std::size_t bucket_count() const noexcept { return core_.bucket_count(); }
  const Policy& policy() const noexcept { return policy_; }

  // The wrapper of `identity`, acquired (Policy::try_acquire), or null (always for null and
  // ~0, and after close()). Never calls out but to try_acquire.
  [[nodiscard]] void* try_get(const void* identity) const noexcept requires(!takes_context) {
    return try_get_with(identity, nullptr);
  }
  [[nodiscard]] void* try_get(context c, const void* identity) const noexcept requires takes_context {
    return try_get_with(identity, &c);
  }
  // The wrapper of `identity` without try_acquire, or null (also after close()): valid for
  // as long as the host keeps it (under its lock: until it releases it; a tracing host: while
  // the pointer is reachable). grace_period: call it inside a read section (read_section.hpp),
  // which keeps the table probed valid; a null result may also mean a writer was at work in
  // the bucket (try_get() asks under the lock then).
  [[nodiscard]] void* find(const void* identity) const noexcept {
    if (detail::is_reserved_key(identity)) [[unlikely]]
      return nullptr;
    if constexpr (reclamation == host_reclamation::host_lock) {
      return detail::host_find_exclusive(core_.view(), identity);
    } else {
      void* w = detail::host_find_concurrent(core_.view(), identity);
      return w == detail::host_writer_busy() ? nullptr : w;
    }
  }

  // The live wrapper of `identity`; if there is none, factory(identity) makes one (returning
  // a void* the caller owns a reference to, non-null), with no lock held, and it is cached.
  // Throws std::invalid_argument for a null or ~0 identity, or a null result; whatever the
  // factory throws; std::bad_alloc if a table cannot grow (the factory's wrapper is
  // released first); host_cache_closed after close() (before calling the factory, or after:
  // its wrapper released); in a fork()ed child (grace_period) pal::forked_child_error.
  // Nothing was cached then.
  template <class Factory>
  [[nodiscard]] host_entry get_or_create(const void* identity, Factory&& factory) requires(!takes_context) {
    return get_or_create_with(identity, factory, nullptr);
  }
  template <class Factory>
  [[nodiscard]] host_entry get_or_create(context c, const void* identity, Factory&& factory) requires takes_context {
    return get_or_create_with(identity, factory, &c);
  }
  // Caches `wrapper` (the caller keeps its reference: the cache takes none) for `identity`,
  // unless a live wrapper is cached for it already: that one is returned, acquired, and
  // `wrapper` is left to the caller. Throws as get_or_create() does (no factory).
  [[nodiscard]] host_entry insert(const void* identity, void* wrapper) requires(!takes_context) {
    return insert_with(identity, wrapper, nullptr);
  }
  [[nodiscard]] host_entry insert(context c, const void* identity, void* wrapper) requires takes_context {
    return insert_with(identity, wrapper, &c);
  }
  // Removes the entry of token.identity() if it maps it to token.wrapper(): true if it did.
  // Works after close() too.
  bool erase(host_token token) noexcept { return core_.erase(token); }  // false: nothing to undo

  // Removes the entry of every wrapper the host's liveness test finds dead: calls
  // is_alive(std::span<void* const> wrappers, std::span<bool> alive) with batches of the
  // cached wrappers, which sets alive[i] for each. Returns how many it removed. When to call
  // it: see the top of this file.
  template <class IsAliveBatch>
  std::size_t sweep(IsAliveBatch&& is_alive) {
    static_assert(!std::is_function_v<std::remove_reference_t<IsAliveBatch>>,
                  "palrt::interop::host_identity_cache::sweep: pass a lambda or function object, not a "
                  "function's name (wrap it: [](auto w, auto a) { f(w, a); })");
    return core_.sweep(const_cast<void*>(static_cast<const void*>(std::addressof(is_alive))),
                       [](void* f, std::span<void* const> wrappers, std::span<bool> alive) {
                         (*static_cast<std::remove_reference_t<IsAliveBatch>*>(f))(wrappers, alive);
                       });
  }

  // sweep() for a host that cannot stop the world (a JVM binding: its collector clears weak
  // references and the binding sweeps afterwards, with Java threads running). grace_period:
  // takes each bucket's writer lock for a batch of up to 256 wrappers at a time, so lookups
  // run on (they probe again when the sweep removed entries under them, as after an erase),
  // and inserts and erases of that bucket wait for one batch at most; is_alive runs with that
  // lock held and must not call this cache. A wrapper is_alive finds dead has its entry
  // removed, by this sweep and no other step, so the host frees it, after a grace period (a
  // lookup may be inside try_acquire() on it): is_alive knows which ones it found dead. If
  // is_alive throws, the batch it was given stays as it was, the batches before it stay
  // removed, and the exception propagates. host_lock: sweep(). Works after close() too.
  // Throws pal::forked_child_error in a fork()ed child (grace_period: a parent's thread may
  // have held a lock).
  template <class IsAliveBatch>
  std::size_t sweep_concurrently(IsAliveBatch&& is_alive) {
    static_assert(!std::is_function_v<std::remove_reference_t<IsAliveBatch>>,
                  "palrt::interop::host_identity_cache::sweep_concurrently: pass a lambda or function object, not "
                  "a function's name (wrap it: [](auto w, auto a) { f(w, a); })");
    return core_.sweep_concurrently(const_cast<void*>(static_cast<const void*>(std::addressof(is_alive))),
                                    [](void* f, std::span<void* const> wrappers, std::span<bool> alive) {
                                      (*static_cast<std::remove_reference_t<IsAliveBatch>*>(f))(wrappers, alive);
                                    });
  }

  // The end of the runtime (see "The end of a runtime" at the top of this file): from now on
  // lookups miss and inserts throw host_cache_closed; erase(), sweep() and counters() work
  // on. grace_period: returns once no thread is inside a lookup or insert that began before
  // (so none is calling try_acquire any more), which it waits for (a grace period: a few
  // microseconds, longer while a reader is preempted); throws std::logic_error when called
  // inside a read section of the calling thread. Idempotent.
  void close() { core_.close(); }
  bool closed() const noexcept { return core_.closed(); }
  // grace_period: returns once every lookup and insert in progress at the call has finished,
  // so a wrapper whose entry was erased before it may be freed at once. A barrier and a wait
  // (microseconds): for a rare path, such as a host whose retire() failed with
  // std::bad_alloc, never per wrapper (retire it). Throws std::logic_error inside a read
  // section of the calling thread. host_lock: nothing to wait for.
  void synchronize() { core_.synchronize(); }

  host_cache_counters counters() const { return core_.counters(); }

 private:
  friend class internal::host_cache_access;

  // `c`: the call's context (a context*), null for a policy that takes none.
  bool acquire(void* c, void* w) const noexcept { return try_acquire_hook(&policy_, c, w); }
  void release(void* c, void* w) const noexcept {
    if constexpr (takes_context)
      policy_.release(*static_cast<context*>(c), w);
    else
      policy_.release(w);
  }
  static bool try_acquire_hook(const void* policy, void* c, void* w) noexcept {
    if constexpr (takes_context)
      return static_cast<const Policy*>(policy)->try_acquire(*static_cast<context*>(c), w);
    else
      return static_cast<const Policy*>(policy)->try_acquire(w);
  }

  void* try_get_with(const void* identity, void* c) const noexcept;
  template <class Factory>
  host_entry get_or_create_with(const void* identity, Factory& factory, void* c) {
    if (void* hit = try_get_with(identity, c)) return {hit, host_token(identity, hit), false};
    if (detail::is_reserved_key(identity)) detail::host_map_core::throw_reserved("get_or_create", identity);
    if (core_.closed()) detail::host_map_core::throw_closed("get_or_create");
    void* made = factory(identity);
    if (!made) detail::host_map_core::throw_no_wrapper("get_or_create");
    host_entry e;
    try {
      e = core_.insert(identity, made, "get_or_create", c);
    } catch (...) {
      release(c, made);
      throw;
    }
    if (!e.inserted) release(c, made);  // lost a race: the winner is returned
    return e;
  }
  host_entry insert_with(const void* identity, void* wrapper, void* c) {
    if (detail::is_reserved_key(identity)) detail::host_map_core::throw_reserved("insert", identity);
    if (!wrapper) detail::host_map_core::throw_no_wrapper("insert");
    return core_.insert(identity, wrapper, "insert", c);
  }

  [[no_unique_address]] const Policy policy_;
  detail::host_map_core core_;
};

template <class Policy>
void* host_identity_cache<Policy>::try_get_with(const void* identity, void* c) const noexcept {
  if (detail::is_reserved_key(identity)) [[unlikely]]
    return nullptr;
  if constexpr (reclamation == host_reclamation::host_lock) {
    void* w = detail::host_find_exclusive(core_.view(), identity);
    return w && acquire(c, w) ? w : nullptr;
  } else {
    // The table probed stays valid until the section ends; and close() waits for the sections
    // open when it hid the tables, so once it returned no lookup is calling try_acquire.
    gc::read_section section;
    void* w = detail::host_find_concurrent(core_.view(), identity);
    if (w == detail::host_writer_busy()) [[unlikely]]
      return core_.try_get_locked(identity, c);
    return w && acquire(c, w) ? w : nullptr;
  }
}

}  // namespace palrt::interop

// SPDX-License-Identifier: MIT
// palrt::interop::identity_cache: the map from a native identity pointer to the managed
// wrapper for it (a runtime's RCW cache), and from a managed object to the wrapper native
// code sees for it (its outbound wrapper, a CCW).
//
// A host that exposes native objects to managed code keeps exactly one wrapper per native
// identity, so that the same native object always shows up as the same managed object. It
// asks the cache on essentially every native-to-managed transition, and those are hits, while
// the finalizer thread removes the entries of wrappers that died. So:
//
// Example:
//   struct com_proxy : palrt::gc::object, palrt::interop::wrapper_object {  // wrapper_object.hpp
//     explicit com_proxy(const void* id) : identity(id) {}
//     const void* identity;
//   };
//   palrt::interop::identity_cache cache(collector);
//   palrt::gc::ref<com_proxy> p = cache.get_or_create<com_proxy>(native, [&](const void* id) {
//     return palrt::gc::make_object<com_proxy>(collector, id);   // QueryInterface etc.
//   });
//
// - Buckets: RoundUpToPowerOf2(processor count), chosen by Fibonacci (multiply-shift)
//   hashing of the pointer: native objects are at least 16-byte aligned, so their low bits
//   are constant and masking them would put everything in one bucket.
// - A hit writes no shared cache line: it probes the bucket's open-addressing table under a
//   read section of the collector (read_section.hpp: two stores to the calling thread's own
//   line), loads the entry's weak handle's target and takes a reference. Writers (an insert,
//   the finalizer's removal, compaction) take the bucket's lock. When tombstones dominate, a
//   bucket's table is compacted instead of grown; the table it replaces is freed after a
//   grace period.
// - An entry stores the handle its wrapper's record already owns (wrapper_record below): one
//   weak handle per cached wrapper, weak-long (it tracks the wrapper through finalization).
//   The cache never frees a handle. When the wrapper dies, its record is finalized on the
//   finalizer thread: it removes its entry by exact handle (so an entry made since for the
//   same identity is never removed), then frees its handle.
// - The factory (the host's QueryInterface-like call) runs with no lock held. When two
//   threads race to create the wrapper of one identity, one wins, both get the winner, and
//   the loser's wrapper is simply dropped: nothing refers to it, so it is collected (and
//   finalized, if it is finalizable) like any other dead object.
// - A wrapper whose type derives from wrapper_object (wrapper_object.hpp) keeps its record
//   and its outbound wrapper in its own fields; any other object goes through process-wide
//   (records) or per-cache (outbound wrappers) side tables keyed weakly on the object. Give
//   the cache the wrapper's own type (ref<com_proxy>, not ref<object>) so that it sees the
//   fields without a dynamic_cast.
//
// Resurrection: a wrapper whose finalizer resurrects it (finalizable::resurrect()) is still
// the wrapper of its identity: its record and its entry stay (the handle is weak-long, cleared
// only once the wrapper is dead after finalization), and try_get(), find() and get_or_create()
// return it again once it is alive. While it is dead (its count reached zero, until its
// finalizer brings it back) it is never handed out, as a dead object never is (object.hpp:
// zero is terminal): a get_or_create() in that window makes a new wrapper, which replaces the
// entry, and the dead one, if its finalizer then resurrects it, comes back uncached (its
// record still names its identity and removes nothing when it retires). That is CoreCLR's
// rule for a wrapper its RCW cache finds dead (the cache "detaches" it, re-keying it under its
// own address, and the next lookup makes a new one), applied only where it must be: there a
// collection detaches every wrapper it finds dead, resurrected later or not; here only a
// lookup made while the wrapper was dead does. Either way the cache never holds two wrappers
// for one identity.
//
// Identities: any pointer value but two, which mark empty and removed slots in palrt's
// tables: null and ~0 (all bits set). No native object has either address (~0 is in the
// kernel's half of the address space; CoreCLR's RCW cache excludes the same value). For
// them try_get() and find() return empty, remove() returns false and get_or_create() throws
// std::invalid_argument naming which one it was, before calling the factory. The hit path
// tests both with one compare; accepting ~0 would move the marker to another value (one more
// reserved identity) or to an address of palrt's own that the hit path would have to compare
// too.
//
// palrt-bench measures this design beside lock-based ones with the same records, handles
// and contracts; those designs are in palrt's source tree only, not among the installed
// headers.
//
// Costs, on the machine of docs/BENCHMARKS.md ("Interop identity cache"): a hit through
// find() inside a read section ~8 ns, and two threads together ~2x one (it writes nothing
// shared); 3-4x faster than a lock and a hash map per bucket on one thread, ~25x on two. A
// counted hit (try_get, get_or_create) ~20 ns more or less whatever the threads: taking and
// dropping the reference are two atomic read-modify-writes on the wrapper's line. A host
// with its own GC, which needs no count, uses find().
//
// Thread safety: every member may be called from any thread concurrently, the finalizer
// thread's included. Lifetime: the cache may be destroyed while wrappers it made are alive
// (their records then remove nothing); it must not be destroyed while another thread uses it.
// Its collector must outlive it, and every wrapper must belong to that collector. A runtime
// may end (cache, finalizer, collector and handle table destroyed) while the host still holds
// wrappers, and a new one start in the same process: the old wrappers may then only be
// dropped (collector.hpp), and the records' side table never touches their entries again
// (each entry is tagged with its collector), so the new runtime's caches work as in a fresh
// process.
//
// After fork() (palrt/pal/fork.hpp): in a child, a cache made before fork() is the parent's,
// and another thread may have held one of its locks at fork(). What takes no lock works on
// the child's copy: find() and try_get() (hits and misses of the palrt design; the benchmark
// designs, whose lookups lock, miss), try_get_outbound() answered by a wrapper_object field,
// dispatch() for the types it has views of. What would take a lock fails at once:
// get_or_create (before calling the factory), get_or_create_outbound, a try_get_outbound
// that needs the side table and counters() throw pal::forked_child_error; remove() returns
// false. Destroying it returns at once and keeps its state allocated. Making a cache for a
// collector of the parent throws pal::forked_child_error; a cache made in the child, for a
// collector of the child, works.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "palrt/interop/detail/identity_fast_path.hpp"
#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/wrapper_object.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/object.hpp"
#include "palrt/gc/owned_handle.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::interop {

struct cache_options {
  // 0: RoundUpToPowerOf2(pal::processor_count()) buckets; otherwise this many, rounded up to
  // a power of two (at most 4096).
  std::size_t buckets = 0;
  // Optional, for diagnostics and benchmarks: called once for each wrapper this cache
  // cached, when its record retires (the wrapper died, a collection found it, and the
  // record's finalization, usually on the finalizer thread, removed the entry, or found it
  // gone already: replaced by a newer wrapper, evicted, or dropped by compaction), with no
  // lock held. Not called once the cache is destroyed; a call that started before may still
  // be running when the destructor returns, so the context must outlive the cache's
  // wrappers. It must not throw.
  void (*on_removed)(void* context, const void* identity) noexcept = nullptr;
  void* on_removed_context = nullptr;
  // Which interfaces of a managed type this cache exposes to native code (dispatch()).
  dispatch_policy dispatch{};
};

// Relaxed snapshots; entries and tombstones are summed over buckets, each read under its lock.
struct cache_counters {
  std::size_t buckets = 0;
  std::size_t entries = 0;          // entries in the map, dead wrappers not yet removed included
  std::size_t tombstones = 0;       // removed entries still occupying a slot (palrt design)
  std::uint64_t inserted = 0;       // wrappers made by a factory and cached
  std::uint64_t races_lost = 0;     // factory results dropped because another thread won
  std::uint64_t dead_replaced = 0;  // entries of dead wrappers replaced by get_or_create
  std::uint64_t removed = 0;        // entries removed by exact handle (remove(), finalization)
  std::uint64_t rebuilds = 0;       // bucket tables grown or compacted (palrt design)
  std::size_t retired_tables = 0;   // replaced tables waiting for a grace period
};

// Thrown by get_or_create when the factory returns a wrapper that is already the wrapper of
// another identity. Nothing was inserted; the cache is unchanged.
class identity_mismatch : public std::invalid_argument {
 public:
  identity_mismatch(const void* asked, const void* registered);
  const void* asked() const noexcept { return asked_; }
  const void* registered() const noexcept { return registered_; }

 private:
  const void* asked_;
  const void* registered_;
};

namespace internal {
struct cache_state;
class record_key;
class identity_cache_access;
enum class cache_design : std::uint8_t;  // the designs palrt-bench compares (not installed)
}  // namespace internal

namespace detail {
// What a type-erased factory hands back: the wrapper, and its wrapper_object fields if its
// static type has them.
struct made_wrapper {
  gc::ref<gc::object> wrapper;
  wrapper_object* slots = nullptr;
};
using factory_fn = made_wrapper (*)(void* factory, const void* argument);
template <class U>
wrapper_object* slots_of(U* p) noexcept {
  if constexpr (std::is_base_of_v<wrapper_object, U>)
    return p;  // the static type has the fields: no cast at run time
  else
    return p ? dynamic_cast<wrapper_object*>(static_cast<gc::object*>(p)) : nullptr;
}
}  // namespace detail

// A cached wrapper's record (what a runtime's native-object wrapper tracks): the identity,
// and the weak handle to the wrapper that the cache's entry stores. It lives exactly as long as
// its wrapper (the wrapper's field, or the side table, holds it). Its finalization removes
// its entry from its cache by exact handle and then frees the handle.
class wrapper_record final : public gc::finalizable {
 public:
  wrapper_record(const internal::record_key&, const void* identity, gc::owned_handle handle,
                 std::shared_ptr<internal::cache_state> cache) noexcept;

  const void* identity() const noexcept { return identity_; }
  // The weak (long) handle to the wrapper, null once the record has removed its entry. Its
  // target stays through the wrapper's finalization (and resurrection); a dead wrapper's
  // count is zero, which is what the cache checks before handing it out.
  gc::handle handle() const noexcept { return handle_.get(); }
  std::uint64_t cache_id() const noexcept { return cache_id_; }

 private:
  friend class internal::identity_cache_access;
  void finalize() override;
  // Also removes the entry if finalize() never ran (no finalizer thread, or suppressed).
  ~wrapper_record() override;
  void retire() noexcept;  // remove the entry by exact handle, then free the handle

  friend class identity_cache;
  const void* const identity_;
  // The weak handle to the wrapper. Written by its cache while linking the record (before
  // the entry is published) and by retire(), which runs only once the wrapper is dead.
  gc::owned_handle handle_;
  // The wrapper's address if the record is in the process-wide side table (no field).
  const void* side_table_key_ = nullptr;
  // The record won its wrapper's field or side-table entry (a loser's record never did).
  bool linked_ = false;
  const std::uint64_t cache_id_;
  std::shared_ptr<internal::cache_state> cache_;
};

namespace detail {
gc::ref<wrapper_record> record_in_fields(const wrapper_object& wrapper);
gc::ref<wrapper_record> record_of_object(const gc::object& wrapper);  // fields or side table
}  // namespace detail

// The record of `wrapper`, if it is a wrapper some cache made; empty otherwise. A field read
// when W derives from wrapper_object; otherwise a dynamic_cast and maybe a side-table lookup.
template <class W>
gc::ref<wrapper_record> record_of(const W& wrapper) {
  if constexpr (std::is_base_of_v<wrapper_object, W>)
    return detail::record_in_fields(wrapper);
  else
    return detail::record_of_object(wrapper);
}

class identity_cache {
 public:
  explicit identity_cache(gc::collector& collector, cache_options options = {});
  identity_cache(const identity_cache&) = delete;
  identity_cache& operator=(const identity_cache&) = delete;
  ~identity_cache();

  // Unique in the process for its lifetime (never 0, never reused).
  std::uint64_t id() const noexcept { return id_; }
  std::size_t bucket_count() const noexcept;

  // The live wrapper of `identity`; if there is none, factory(identity) makes one, with no
  // lock held, and it is cached (see the top of this file for races). The factory returns a
  // gc::ref<U>, U derived from gc::object; the result is cast to T (static: the caller
  // knows the wrapper's type). Throws std::invalid_argument for a null identity or the
  // reserved identity ~0 (its message says which; see "Identities" above), or if the
  // factory returns null, an object of another collector or a wrapper another cache made;
  // identity_mismatch if it returns the wrapper of another identity; std::bad_alloc or
  // handle_allocation_error; and whatever the factory throws. In each case nothing was
  // inserted and the cache is usable. A factory that returns this cache's wrapper of this
  // identity (evicted earlier with remove()) gets it cached again with its own record.
  template <class T = gc::object, class Factory>
  [[nodiscard]] gc::ref<T> get_or_create(const void* identity, Factory&& factory) {
    using made = std::remove_cvref_t<std::invoke_result_t<Factory&, const void*>>;
    using U = typename made::element_type;
    detail::factory_fn call = [](void* f, const void* id) -> detail::made_wrapper {
      gc::ref<U> w = (*static_cast<std::remove_reference_t<Factory>*>(f))(id);
      wrapper_object* slots = detail::slots_of(w.get());
      return {gc::ref<gc::object>(std::move(w)), slots};
    };
    if (gc::ref<T> hit = try_get<T>(identity)) return hit;
    return gc::static_ref_cast<T>(get_or_create_erased(identity, call, erase(factory)));
  }
  // The live wrapper of `identity`, cast to T as get_or_create<T> casts it, or empty (always
  // for null and ~0). Never calls out.
  template <class T = gc::object>
  [[nodiscard]] gc::ref<T> try_get(const void* identity) const noexcept;
  // The hit path without the reference count, for a caller already in a read section
  // (read_section.hpp): the wrapper of `identity` if it was alive when looked at, else null.
  // The pointer is valid memory until the section ends; take a reference to keep it.
  [[nodiscard]] gc::object* find(const void* identity) const noexcept;
  // Removes the entry of `identity` if it holds exactly `handle` (a wrapper record's handle):
  // true if it did. An identity that is not cached, or cached with another handle, is left
  // alone: false (also for null and ~0). Records call it for themselves; a host calls it to
  // evict a wrapper early (the wrapper stays alive, and it is cached again if a factory
  // returns it later).
  bool remove(const void* identity, gc::handle handle) noexcept;

  // The outbound wrapper of `managed` made by this cache; if it has none, factory(managed)
  // makes one, with no lock held, and it is kept for as long as `managed` lives (the first
  // to publish wins; the loser's wrapper is dropped). The wrapper must not hold a strong
  // reference to `managed`, or neither can ever be collected (reference counts cannot see
  // the cycle): hold it by a weak handle, or strongly only while native code holds it.
  // Throws std::invalid_argument for an empty `managed` or a null result, and whatever the
  // factory throws (nothing is kept then).
  template <class T = gc::object, class M, class Factory>
  [[nodiscard]] gc::ref<T> get_or_create_outbound(const gc::ref<M>& managed, Factory&& factory) {
    using made = std::remove_cvref_t<std::invoke_result_t<Factory&, const gc::ref<M>&>>;
    if (managed) {
      if (gc::ref<T> hit = try_get_outbound<T>(*managed)) return hit;
    }
    auto call = [](void* f, const void* m) -> detail::made_wrapper {
      const auto& target = *static_cast<const gc::ref<M>*>(m);
      gc::ref<typename made::element_type> w = (*static_cast<std::remove_reference_t<Factory>*>(f))(target);
      return {gc::ref<gc::object>(std::move(w)), nullptr};
    };
    return gc::static_ref_cast<T>(get_or_create_outbound_erased(
        managed.get(), managed ? detail::slots_of(managed.get()) : nullptr, call, erase(factory), &managed));
  }
  // The outbound wrapper this cache made for `managed`, cast to T (as get_or_create_outbound<T>
  // casts it), or empty.
  template <class T = gc::object, class M>
  [[nodiscard]] gc::ref<T> try_get_outbound(const M& managed) const {
    wrapper_object* slots = detail::slots_of(const_cast<M*>(&managed));
    if (slots) {
      if (gc::object* w = field_outbound(*slots)) return gc::static_ref_cast<T>(own(w));
    }
    return gc::static_ref_cast<T>(try_get_outbound_erased(const_cast<M&>(managed), slots));
  }

  // The dispatch tables (vtables) this cache's outbound wrappers expose: the process-wide
  // tables, built once per type whichever cache asks first, seen through this cache's
  // policy (cache_options::dispatch) and its own L1 (dispatch_tables.hpp). A new cache never
  // rebuilds a table, and never sees another cache's policy.
  dispatch_cache& dispatch() noexcept { return dispatch_; }

  cache_counters counters() const;

 private:
  friend class internal::identity_cache_access;
  // A cache of another design, for palrt's benchmarks (identity_cache_access::make).
  identity_cache(gc::collector& collector, cache_options options, internal::cache_design design);
  // A miss of get_or_create (the factory, the record, the insert).
  gc::ref<gc::object> get_or_create_erased(const void* identity, detail::factory_fn factory, void* context);
  // find() for the designs without an inline hit path.
  gc::object* find_slow(const void* identity) const noexcept;
  gc::ref<gc::object> get_or_create_outbound_erased(gc::object* managed, wrapper_object* slots,
                                                    detail::factory_fn factory, void* context, const void* argument);
  gc::ref<gc::object> try_get_outbound_erased(gc::object& managed, wrapper_object* slots) const;
  // The field's wrapper if this cache owns the field (inline: one load and a compare).
  gc::object* field_outbound(const wrapper_object& slots) const noexcept;
  static gc::ref<gc::object> own(gc::object* alive) noexcept;
  // A factory's address for the type-erased call (the call casts it back, const or not).
  template <class F>
  static void* erase(F& f) noexcept {
    return const_cast<void*>(static_cast<const void*>(std::addressof(f)));
  }

  const std::uint64_t id_;
  std::shared_ptr<internal::cache_state> state_;
  // The palrt design's buckets, read inline by find(); null for the other designs.
  const detail::bucket_view* fast_ = nullptr;
  dispatch_cache dispatch_;
};

// The hit path, inline: the read section's two stores, a hash, the probe (detail/).
inline gc::object* identity_cache::find(const void* identity) const noexcept {
  if (detail::is_reserved_key(identity)) [[unlikely]]
    return nullptr;
  if (fast_) [[likely]]
    return detail::find_in_buckets(*fast_, identity);
  return find_slow(identity);
}

template <class T>
gc::ref<T> identity_cache::try_get(const void* identity) const noexcept {
  static_assert(std::is_base_of_v<gc::object, T>, "identity_cache::try_get<T>: T must derive from palrt::gc::object");
  gc::read_section section;  // the wrapper's memory stays valid until we hold a reference
  gc::object* w = find(identity);
  if (!w || !gc::detail::object_access::try_add_ref(*w)) return {};
  return gc::ref<T>::adopt(static_cast<T*>(w));
}

inline gc::object* identity_cache::field_outbound(const wrapper_object& slots) const noexcept {
  // acquire: the wrapper was initialised, and its id stored, before it was published.
  gc::object* w = detail::wrapper_access::outbound(slots).load(std::memory_order_acquire);
  if (w && detail::wrapper_access::outbound_cache_id(slots).load(std::memory_order_relaxed) == id_) return w;
  return nullptr;
}

inline gc::ref<gc::object> identity_cache::own(gc::object* alive) noexcept {
  // The field holds a reference and the caller holds the managed object: `alive` is alive.
  gc::detail::object_access::add_ref(*alive);
  return gc::ref<gc::object>::adopt(alive);
}

}  // namespace palrt::interop

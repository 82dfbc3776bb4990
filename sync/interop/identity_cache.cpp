// SPDX-License-Identifier: MIT
// identity_cache: what every design shares (identity_cache.hpp): records, factories, the
// wrapper fields and side tables. The maps themselves are bucket_map.cpp (palrt) and
// locked_maps.cpp (the designs it is measured against).
#include "palrt/interop/identity_cache.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/interop/internal/bucket_map.hpp"
#include "palrt/interop/internal/cache_state.hpp"
#include "palrt/interop/internal/locked_maps.hpp"
#include "palrt/pal/cpu.hpp"
#include "palrt/pal/fork.hpp"
#include "palrt/gc/internal/collector_state.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::interop {

namespace internal {
namespace {

std::unique_ptr<entry_map> make_map(const cache_options& o, cache_design design) {
  const std::size_t processors = static_cast<std::size_t>(std::max(1, pal::processor_count()));
  switch (design) {
    case cache_design::palrt: return std::make_unique<bucket_map>(o.buckets ? o.buckets : processors);
    case cache_design::bucketed_rwlock: return std::make_unique<rwlock_map>(o.buckets ? o.buckets : processors);
    case cache_design::single_lock: return std::make_unique<rwlock_map>(1);
    case cache_design::pybind11_shards: return std::make_unique<pybind11_map>(o.buckets);
  }
  throw std::invalid_argument("palrt: identity_cache: unknown cache_design");
}

std::uint64_t next_cache_id() noexcept {
  static std::atomic<std::uint64_t> last{0};
  // relaxed: only uniqueness matters.
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

bool is_reserved(const void* identity) noexcept { return detail::is_reserved_key(identity); }

[[noreturn]] void throw_invalid(const char* operation, const char* problem) {
  throw std::invalid_argument(std::string("palrt: identity_cache::") + operation + ": " + problem);
}

// The two reserved identities, told apart (the hit path tests both with one compare).
[[noreturn]] void throw_reserved(const char* operation, const void* identity) {
  if (!identity) throw_invalid(operation, "the identity is null");
  throw_invalid(operation, "the identity ~0 (all bits set) is reserved: it marks removed entries, and no native object "
                           "has that address");
}

// Every call that would take one of the cache's locks starts here: in a fork()ed child they
// may be held for good by a thread the child does not have.
void refuse_in_forked_child(const cache_state& s, const char* operation) {
  if (s.made.forked()) throw pal::forked_child_error(std::string("identity_cache::") + operation);
}

gc::collector& collector_of_this_process(gc::collector& c) {
  if (gc::internal::collector_access::state(c)->made.forked())
    throw pal::forked_child_error("identity_cache: the collector");
  return c;
}

}  // namespace

cache_state::cache_state(gc::collector& c, const cache_options& o, cache_design d, std::uint64_t cache_id)
    : collector(c), table(c.handles()), options(o), design(d), id(cache_id), map(make_map(o, d)) {}

}  // namespace internal

identity_cache::identity_cache(gc::collector& collector, cache_options options)
    : identity_cache(collector, std::move(options), internal::cache_design::palrt) {}

identity_cache::identity_cache(gc::collector& collector, cache_options options, internal::cache_design design)
    : id_(internal::next_cache_id()),
      state_(std::make_shared<internal::cache_state>(internal::collector_of_this_process(collector), options, design,
                                                     id_)),
      dispatch_(options.dispatch) {
  if (auto* buckets = dynamic_cast<internal::bucket_map*>(state_->map.get())) fast_ = &buckets->view();
}

identity_cache::~identity_cache() {
  fast_ = nullptr;
  if (state_->made.forked()) {
    // A fork()ed child: closing the map would take its locks. The state stays, untouched.
    pal::internal::keep_until_exit(state_);
    return;
  }
  state_->open.store(false, std::memory_order_relaxed);  // relaxed: on_removed is best effort here
  // Records of wrappers still alive keep state_ (and find the map closed when they retire).
  state_->map->close();
  state_->outbound.clear();
}

std::size_t identity_cache::bucket_count() const noexcept { return state_->map->bucket_count(); }

gc::object* identity_cache::find_slow(const void* identity) const noexcept {
  // The benchmark designs' find() locks: a miss in a fork()ed child.
  return state_->made.forked() ? nullptr : state_->map->find(identity);
}

bool identity_cache::remove(const void* identity, gc::handle handle) noexcept {
  if (internal::is_reserved(identity) || !handle || state_->made.forked()) return false;
  if (!state_->map->remove(identity, handle)) return false;
  state_->removed.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
  return true;
}

gc::ref<gc::object> identity_cache::get_or_create_erased(const void* identity, detail::factory_fn factory,
                                                         void* context) {
  internal::refuse_in_forked_child(*state_, "get_or_create");
  if (internal::is_reserved(identity)) internal::throw_reserved("get_or_create", identity);

  // A miss: the factory runs with no lock held (it may call back into this cache, even for
  // the same identity, from this or another thread).
  detail::made_wrapper made = factory(context, identity);
  if (!made.wrapper) internal::throw_invalid("get_or_create", "the factory returned no wrapper");
  if (&gc::detail::object_access::table_of(*made.wrapper) != &state_->table)
    internal::throw_invalid("get_or_create", "the factory returned an object of another collector");

  // The record and its weak handle are made before any lock is taken. Weak-long: it tracks
  // the wrapper through finalization, so that a wrapper its finalizer resurrects is still the
  // one its entry leads to (identity_cache.hpp, "Resurrection"). A hit never hands out a
  // wrapper that is dead meanwhile: the maps take only a count that is not zero.
  gc::ref<wrapper_record> record = gc::make_object<wrapper_record>(
      state_->collector, internal::record_key(), identity,
      gc::owned_handle(state_->table, gc::handle_kind::weak_long, made.wrapper.get()), state_);

  // Under the identity's lock, once the map has found no live wrapper: link the record to
  // the wrapper (first registration wins) and say which handle the entry holds.
  struct linking {
    identity_cache* cache;
    const void* identity;
    detail::made_wrapper* made;
    wrapper_record* record;
    bool reused = false;  // the wrapper already had a record of this cache for this identity
  } link{this, identity, &made, record.get()};
  auto attach = [](void* p) -> gc::handle {
    auto& l = *static_cast<linking*>(p);
    wrapper_record* existing = nullptr;
    if (l.made->slots) {
      auto& field = detail::wrapper_access::record(*l.made->slots);
      gc::detail::object_access::add_ref(*l.record);  // the field's reference, if it wins
      // acq_rel: publishes the record's initialisation; on failure, acquire sees the winner's.
      if (field.compare_exchange_strong(existing, l.record, std::memory_order_acq_rel, std::memory_order_acquire)) {
        l.record->linked_ = true;
        return l.record->handle();
      }
      gc::detail::object_access::release(*l.record);
    } else {
      internal::weak_object_table& side = internal::record_side_table();
      std::lock_guard<std::mutex> lock(side.lock_for(l.made->wrapper.get()));
      gc::detail::object_access::add_ref(*l.record);  // a reference for the call (the entry takes its own)
      const gc::ref<gc::object> value = gc::ref<wrapper_record>::adopt(l.record);
      gc::ref<gc::object> winner = side.insert_locked(l.made->wrapper, value);
      if (winner.get() == l.record) {
        l.record->side_table_key_ = l.made->wrapper.get();
        l.record->linked_ = true;
        return l.record->handle();
      }
      existing = static_cast<wrapper_record*>(winner.get());  // the table still holds it
    }
    if (existing->identity() != l.identity) throw identity_mismatch(l.identity, existing->identity());
    if (existing->cache_id() != l.cache->id_) {
      char text[160];
      std::snprintf(text, sizeof text, "the factory returned a wrapper of another cache (id %" PRIu64 ")",
                    existing->cache_id());
      internal::throw_invalid("get_or_create", text);
    }
    // The wrapper is alive (we hold it), so its record has not retired: its handle is live.
    l.reused = true;
    return existing->handle();
  };

  gc::ref<gc::object> winner;
  try {
    winner = state_->map->insert(identity, attach, &link);
  } catch (...) {
    suppress_finalize(*record);  // never linked: its destructor frees its handle
    throw;
  }
  if (winner || link.reused) suppress_finalize(*record);
  if (winner) {
    // Lost the race: our wrapper is dropped with `made` (nothing refers to it).
    state_->races_lost.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
    return winner;
  }
  if (!link.reused) state_->inserted.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
  return std::move(made.wrapper);
}

gc::ref<gc::object> identity_cache::get_or_create_outbound_erased(gc::object* managed, wrapper_object* slots,
                                                                  detail::factory_fn factory, void* context,
                                                                  const void* argument) {
  internal::refuse_in_forked_child(*state_, "get_or_create_outbound");
  if (!managed) internal::throw_invalid("get_or_create_outbound", "no object");
  detail::made_wrapper made = factory(context, argument);  // no lock held
  if (!made.wrapper) internal::throw_invalid("get_or_create_outbound", "the factory returned no wrapper");
  if (&gc::detail::object_access::table_of(*made.wrapper) != &gc::detail::object_access::table_of(*managed))
    internal::throw_invalid("get_or_create_outbound", "the wrapper and the object belong to different collectors");

  // Every publication of this cache for `managed` happens under this lock: the field's
  // claim and its value together, or the side table's entry.
  internal::weak_object_table& side = state_->outbound;
  std::lock_guard<std::mutex> lock(side.lock_for(managed));
  if (slots) {
    auto& owner = detail::wrapper_access::outbound_cache_id(*slots);
    auto& field = detail::wrapper_access::outbound(*slots);
    // relaxed: claims are compared only; the value's publication below is the release.
    std::uint64_t current = owner.load(std::memory_order_relaxed);
    if (current == id_) return own(field.load(std::memory_order_relaxed));  // written under our lock
    if (current == 0 && owner.compare_exchange_strong(current, id_, std::memory_order_relaxed)) {
      gc::detail::object_access::add_ref(*made.wrapper);  // the field's reference
      // release: pairs with field_outbound()'s acquire (the claim and the wrapper's state).
      field.store(made.wrapper.get(), std::memory_order_release);
      return std::move(made.wrapper);
    }
  }
  gc::detail::object_access::add_ref(*managed);  // the caller holds it: alive
  return side.insert_locked(gc::ref<gc::object>::adopt(managed), made.wrapper);
}

gc::ref<gc::object> identity_cache::try_get_outbound_erased(gc::object& managed, wrapper_object* slots) const {
  internal::refuse_in_forked_child(*state_, "try_get_outbound");
  internal::weak_object_table& side = state_->outbound;
  if (slots && detail::wrapper_access::outbound_cache_id(*slots).load(std::memory_order_relaxed) == id_) {
    // Claimed by this cache, the value maybe not stored yet: it is, once we hold the lock.
    std::lock_guard<std::mutex> lock(side.lock_for(&managed));
    return own(detail::wrapper_access::outbound(*slots).load(std::memory_order_relaxed));
  }
  return side.find(managed);
}

cache_counters identity_cache::counters() const {
  internal::refuse_in_forked_child(*state_, "counters");
  const internal::map_counters m = state_->map->counters();
  cache_counters c;
  c.buckets = state_->map->bucket_count();
  c.entries = m.entries;
  c.tombstones = m.tombstones;
  c.dead_replaced = m.dead_replaced;
  c.rebuilds = m.rebuilds;
  c.retired_tables = m.retired_tables;
  // relaxed: counters.
  c.inserted = state_->inserted.load(std::memory_order_relaxed);
  c.races_lost = state_->races_lost.load(std::memory_order_relaxed);
  c.removed = state_->removed.load(std::memory_order_relaxed);
  return c;
}

}  // namespace palrt::interop

// SPDX-License-Identifier: MIT
// A side table keyed weakly on objects (a ConditionalWeakTable): object -> value, where the
// value lives as long as the key object does and the table never keeps the key alive. Each
// entry is a dependent handle (primary: the key, secondary: the value), so a collection that
// finds the key dead drops the value; the entry itself is stale from then on and is removed
// by the next lookup of that address, by erase(), or by the sweep an insert runs when the
// table has doubled since the last one.
//
// The identity caches keep here what a wrapper without wrapper_object's fields would keep in
// them: its record (one process-wide table) and its outbound wrappers (one table per cache).
// Sharded by the key's Fibonacci hash, each shard one mutex and one hash map: lookups lock
// their shard, so this path is slower than the fields, as it is meant to be.
//
// Collectors that end (the process-wide table sees one runtime after another). A collector
// destroyed while the host still holds objects of its own leaves them allocated, so that
// dropping them later is safe (collector.hpp); its handle table keeps its blocks, but the
// table itself is gone. An entry of such a collector must never be touched again: releasing
// its dependent handle would call into the destroyed table. So every entry is tagged with its
// key's collector (object_access::collector_of), and each operation reads or destroys only
// entries of the collector of an object it holds: find() and insert_locked() take the
// key's collector's entry for the address, and an insert sweeps only that collector's stale
// entries; erase() is a record removing its own entry, from its finalize() or destructor.
// So each runs while the entry's collector, and its table, are alive; the entries of an
// ended collector are never looked at again and stay, with its other memory, for good.
// A tag never names a collector it does not belong to: a collector that ends with objects
// alive keeps its state (the tag) for the life of the process, and one that ends with none
// has no entries left, since a record erases its entry before it is freed (a record and its
// wrapper belong to one collector: the cache takes only wrappers of its collector's table).
// The per-cache tables (cleared by their cache, which never outlives its collector) need
// none of this and share the code. One table per collector would do as well, but finding it
// from a wrapper would take a process-wide registry, a second lock on every record_of().
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "palrt/gc/object.hpp"
#include "palrt/gc/typed_handles.hpp"

namespace palrt::interop::internal {

class weak_object_table {
 public:
  // held_across_fork: fork() takes the shard locks (pal/internal/fork_generation.hpp), so a
  // child never finds one held by a thread it does not have. Only for a table that is never
  // destroyed (the process-wide record table): fork() keeps the locks' addresses.
  explicit weak_object_table(bool held_across_fork = false);
  weak_object_table(const weak_object_table&) = delete;
  weak_object_table& operator=(const weak_object_table&) = delete;
  ~weak_object_table();

  // The lock that guards `key`'s entry; the *_locked members require it held.
  std::mutex& lock_for(const void* key) const noexcept;

  // The value kept for `key`, or empty (the key object is alive: the caller holds it, and
  // its collector has not been destroyed).
  gc::ref<gc::object> find(const gc::object& key) const;
  gc::ref<gc::object> find_locked(const gc::object& key) const;
  // Keeps `value` for `key` unless a live value is kept already; returns the value kept
  // afterwards (the winner). Key and value must belong to the same collector
  // (std::invalid_argument); throws handle_allocation_error or std::bad_alloc, keeping
  // nothing new then.
  gc::ref<gc::object> insert_locked(const gc::ref<gc::object>& key, const gc::ref<gc::object>& value);
  // Removes `key`'s entry if it keeps exactly `value` (by address; neither is dereferenced),
  // whichever collector it belongs to: the value (a record) removing its own entry before it
  // is freed, while its collector lives.
  bool erase(const void* key, const void* value) noexcept;
  // Releases every entry (their values lose the reference the table held). Every entry's
  // collector must be alive (the per-cache tables: the cache's collector outlives it).
  void clear() noexcept;
  std::size_t size() const;

 private:
  using collector_id = const gc::internal::collector_state*;
  struct entry {
    collector_id collector;  // the key's, whose table holds the handle (see the top of this file)
    gc::dependent_handle<gc::object, gc::object> handle;
    const void* value = nullptr;  // for erase(): compared, never dereferenced
  };
  // At most one entry per address and collector: an address may also have stale entries of
  // other collectors (an object freed, its memory reused by another collector's object).
  using entry_map = std::unordered_multimap<const void*, entry>;
  struct alignas(64) shard {
    mutable std::mutex lock;
    entry_map entries;
    std::size_t sweep_at = 16;
  };
  shard& shard_for(const void* key) const noexcept;
  // `key`'s entry, of its own collector, or end().
  static entry_map::iterator entry_of(shard& s, const gc::object& key) noexcept;
  // Drops the stale entries of `collector` only.
  static void sweep(shard& s, collector_id collector);

  std::unique_ptr<shard[]> shards_;
};

// The process-wide table of records of wrappers without wrapper_object's fields (never
// destroyed: records may be finalized while the process exits).
weak_object_table& record_side_table() noexcept;

}  // namespace palrt::interop::internal

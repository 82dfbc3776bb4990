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
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "palrt/sync/object.hpp"
#include "palrt/sync/typed_handles.hpp"

namespace palrt::interop::internal {

class weak_object_table {
 public:
  weak_object_table();
  weak_object_table(const weak_object_table&) = delete;
  weak_object_table& operator=(const weak_object_table&) = delete;
  ~weak_object_table();

  // The lock that guards `key`'s entry; the *_locked members require it held.
  std::mutex& lock_for(const void* key) const noexcept;

  // The value kept for `key`, or empty (the key object is alive: the caller holds it).
  sync::ref<sync::object> find(const sync::object& key) const;
  sync::ref<sync::object> find_locked(const sync::object& key) const;
  // Keeps `value` for `key` unless a live value is kept already; returns the value kept
  // afterwards (the winner). Key and value must belong to the same collector
  // (std::invalid_argument); throws handle_allocation_error or std::bad_alloc, keeping
  // nothing new then.
  sync::ref<sync::object> insert_locked(const sync::ref<sync::object>& key, const sync::ref<sync::object>& value);
  // Removes `key`'s entry if it keeps exactly `value` (by address; neither is dereferenced).
  bool erase(const void* key, const void* value) noexcept;
  // Releases every entry (their values lose the reference the table held).
  void clear() noexcept;
  std::size_t size() const;

 private:
  struct entry {
    sync::dependent_handle<sync::object, sync::object> handle;
    const void* value = nullptr;  // for erase(): compared, never dereferenced
  };
  struct alignas(64) shard {
    mutable std::mutex lock;
    std::unordered_map<const void*, entry> entries;
    std::size_t sweep_at = 16;
  };
  shard& shard_for(const void* key) const noexcept;
  static void sweep(shard& s);

  std::unique_ptr<shard[]> shards_;
};

// The process-wide table of records of wrappers without wrapper_object's fields (never
// destroyed: records may be finalized while the process exits).
weak_object_table& record_side_table() noexcept;

}  // namespace palrt::interop::internal

// SPDX-License-Identifier: MIT
// Side tables keyed weakly on objects (internal/weak_object_table.hpp).
#include "palrt/interop/internal/weak_object_table.hpp"

#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::interop::internal {

namespace {
constexpr unsigned shard_bits = 4;  // 16 shards: first registrations of unrelated objects rarely meet

// Whether an entry still belongs to `key`: its primary is `key` and alive. A cleared entry
// (the key died and was collected; its address may now be another object's) is stale.
gc::ref<gc::object> live_value(const gc::dependent_handle<gc::object, gc::object>& handle, const gc::object& key) {
  gc::ref<gc::object> primary = handle.try_get_primary();
  if (primary.get() != &key) return {};
  return handle.try_get_secondary();
}
}  // namespace

weak_object_table::weak_object_table(bool held_across_fork) : shards_(new shard[std::size_t{1} << shard_bits]) {
  if (!held_across_fork) return;
  for (std::size_t i = 0; i < (std::size_t{1} << shard_bits); ++i)
    pal::internal::hold_across_fork(shards_[i].lock, pal::internal::fork_lock_rank::side_table);
}

weak_object_table::~weak_object_table() { clear(); }

weak_object_table::shard& weak_object_table::shard_for(const void* key) const noexcept {
  return shards_[bucket_of(fibonacci_hash(key), shard_bits)];
}

std::mutex& weak_object_table::lock_for(const void* key) const noexcept { return shard_for(key).lock; }

gc::ref<gc::object> weak_object_table::find(const gc::object& key) const {
  std::lock_guard<std::mutex> lock(lock_for(&key));
  return find_locked(key);
}

weak_object_table::entry_map::iterator weak_object_table::entry_of(shard& s, const gc::object& key) noexcept {
  const collector_id collector = gc::detail::object_access::collector_of(key);
  auto [it, end] = s.entries.equal_range(&key);
  for (; it != end; ++it)
    if (it->second.collector == collector) return it;  // the tag alone: nothing else is read
  return s.entries.end();
}

gc::ref<gc::object> weak_object_table::find_locked(const gc::object& key) const {
  shard& s = shard_for(&key);
  auto it = entry_of(s, key);
  return it == s.entries.end() ? gc::ref<gc::object>() : live_value(it->second.handle, key);
}

gc::ref<gc::object> weak_object_table::insert_locked(const gc::ref<gc::object>& key, const gc::ref<gc::object>& value) {
  shard& s = shard_for(key.get());
  const collector_id collector = gc::detail::object_access::collector_of(*key);
  auto it = entry_of(s, *key);
  if (it != s.entries.end()) {
    if (gc::ref<gc::object> winner = live_value(it->second.handle, *key)) return winner;
    // Stale: the address belonged to an object of this collector that died. Its dependent
    // handle goes now (this collector, and so its table, is alive: we hold one of its objects).
    s.entries.erase(it);
  }
  if (s.entries.size() >= s.sweep_at) {
    sweep(s, collector);
    s.sweep_at = 2 * s.entries.size() + 16;
  }
  entry e{collector, gc::dependent_handle<gc::object, gc::object>(key, value), value.get()};  // may throw
  s.entries.emplace(key.get(), std::move(e));  // may throw std::bad_alloc: e is released then
  return value;
}

void weak_object_table::sweep(shard& s, collector_id collector) {
  std::erase_if(s.entries, [collector](const auto& kv) {
    return kv.second.collector == collector && !kv.second.handle.try_get_primary();
  });
}

bool weak_object_table::erase(const void* key, const void* value) noexcept {
  shard& s = shard_for(key);
  std::lock_guard<std::mutex> lock(s.lock);
  auto [it, end] = s.entries.equal_range(key);
  for (; it != end; ++it)
    if (it->second.value == value) {
      s.entries.erase(it);
      return true;
    }
  return false;
}

void weak_object_table::clear() noexcept {
  for (std::size_t i = 0; i < (std::size_t{1} << shard_bits); ++i) {
    entry_map doomed;
    {
      std::lock_guard<std::mutex> lock(shards_[i].lock);
      doomed.swap(shards_[i].entries);
    }
    // Released outside the lock: dropping a value may kill it (which only queues it).
  }
}

std::size_t weak_object_table::size() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < (std::size_t{1} << shard_bits); ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].lock);
    n += shards_[i].entries.size();
  }
  return n;
}

weak_object_table& record_side_table() noexcept {
  // Never destroyed (see the header), and shared by the caches of every runtime the process
  // starts, a fork()ed child's among them: its locks are held across fork().
  static weak_object_table* const table = new weak_object_table(true);
  return *table;
}

}  // namespace palrt::interop::internal

// Side tables keyed weakly on objects (internal/weak_object_table.hpp).
#include "palrt/interop/internal/weak_object_table.hpp"

#include "palrt/interop/internal/bucket_hash.hpp"

namespace palrt::interop::internal {

namespace {
constexpr unsigned shard_bits = 4;  // 16 shards: first registrations of unrelated objects rarely meet

// Whether an entry still belongs to `key`: its primary is `key` and alive. A cleared entry
// (the key died and was collected; its address may now be another object's) is stale.
sync::ref<sync::object> live_value(const sync::dependent_handle<sync::object, sync::object>& handle,
                                   const sync::object& key) {
  sync::ref<sync::object> primary = handle.try_get_primary();
  if (primary.get() != &key) return {};
  return handle.try_get_secondary();
}
}  // namespace

weak_object_table::weak_object_table() : shards_(new shard[std::size_t{1} << shard_bits]) {}

weak_object_table::~weak_object_table() { clear(); }

weak_object_table::shard& weak_object_table::shard_for(const void* key) const noexcept {
  return shards_[bucket_of(fibonacci_hash(key), shard_bits)];
}

std::mutex& weak_object_table::lock_for(const void* key) const noexcept { return shard_for(key).lock; }

sync::ref<sync::object> weak_object_table::find(const sync::object& key) const {
  std::lock_guard<std::mutex> lock(lock_for(&key));
  return find_locked(key);
}

sync::ref<sync::object> weak_object_table::find_locked(const sync::object& key) const {
  shard& s = shard_for(&key);
  auto it = s.entries.find(&key);
  return it == s.entries.end() ? sync::ref<sync::object>() : live_value(it->second.handle, key);
}

sync::ref<sync::object> weak_object_table::insert_locked(const sync::ref<sync::object>& key,
                                                         const sync::ref<sync::object>& value) {
  shard& s = shard_for(key.get());
  auto it = s.entries.find(key.get());
  if (it != s.entries.end()) {
    if (sync::ref<sync::object> winner = live_value(it->second.handle, *key)) return winner;
    // Stale: the address belonged to an object that died. Its dependent handle goes now.
    s.entries.erase(it);
  }
  if (s.entries.size() >= s.sweep_at) {
    sweep(s);
    s.sweep_at = 2 * s.entries.size() + 16;
  }
  entry e{sync::dependent_handle<sync::object, sync::object>(key, value), value.get()};  // may throw
  s.entries.emplace(key.get(), std::move(e));  // may throw std::bad_alloc: e is released then
  return value;
}

void weak_object_table::sweep(shard& s) {
  std::erase_if(s.entries, [](const auto& kv) { return !kv.second.handle.try_get_primary(); });
}

bool weak_object_table::erase(const void* key, const void* value) noexcept {
  shard& s = shard_for(key);
  std::lock_guard<std::mutex> lock(s.lock);
  auto it = s.entries.find(key);
  if (it == s.entries.end() || it->second.value != value) return false;
  s.entries.erase(it);
  return true;
}

void weak_object_table::clear() noexcept {
  for (std::size_t i = 0; i < (std::size_t{1} << shard_bits); ++i) {
    std::unordered_map<const void*, entry> doomed;
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
  static weak_object_table* const table = new weak_object_table;  // never destroyed, see the header
  return *table;
}

}  // namespace palrt::interop::internal

// SPDX-License-Identifier: MIT
// The designs palrt's identity map is measured against (internal/locked_maps.hpp). They keep
// entry_map's protocol with locks: find() holds the bucket's (or shard's) lock while it reads
// the entry and its handle's target, so a record's remove() under the same lock cannot free
// the handle in between.
#include "palrt/interop/internal/locked_maps.hpp"

#include <bit>
#include <thread>

#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::interop::internal {

namespace {
unsigned bits_for(std::size_t buckets) {
  const std::size_t n = round_up_to_power_of_two(buckets > 4096 ? 4096 : buckets);
  return static_cast<unsigned>(std::countr_zero(n));
}
}  // namespace

// --- rwlock_map ---

rwlock_map::rwlock_map(std::size_t buckets)
    : bucket_bits_(bits_for(buckets)), buckets_(new bucket[std::size_t{1} << bucket_bits_]) {}

rwlock_map::bucket& rwlock_map::bucket_for(const void* identity) const noexcept {
  return buckets_[bucket_of(fibonacci_hash(identity), bucket_bits_)];
}

gc::object* rwlock_map::find(const void* identity) const noexcept {
  bucket& b = bucket_for(identity);
  std::shared_lock<std::shared_mutex> lock(b.lock);
  auto it = b.entries.find(identity);
  return it == b.entries.end() ? nullptr : live_target(it->second);
}

gc::ref<gc::object> rwlock_map::insert(const void* identity, attach_fn attach, void* context) {
  bucket& b = bucket_for(identity);
  std::unique_lock<std::shared_mutex> lock(b.lock);
  gc::read_section section;
  auto it = b.entries.find(identity);
  if (it != b.entries.end())
    if (gc::ref<gc::object> winner = take_live_target(it->second)) return winner;
  // Room first (may throw std::bad_alloc), so that nothing can fail after attach().
  if (it == b.entries.end()) it = b.entries.try_emplace(identity).first;
  const bool replacing = static_cast<bool>(it->second);
  gc::handle handle;
  try {
    handle = attach(context);
  } catch (...) {
    if (!replacing) b.entries.erase(it);
    throw;
  }
  it->second = handle;
  if (replacing) ++b.dead_replaced;
  return {};
}

bool rwlock_map::remove(const void* identity, gc::handle handle) noexcept {
  bucket& b = bucket_for(identity);
  std::unique_lock<std::shared_mutex> lock(b.lock);
  if (b.closed) return false;
  auto it = b.entries.find(identity);
  if (it == b.entries.end() || it->second != handle) return false;
  b.entries.erase(it);
  return true;
}

void rwlock_map::close() noexcept {
  for (std::size_t i = 0; i < bucket_count(); ++i) {
    std::unique_lock<std::shared_mutex> lock(buckets_[i].lock);
    buckets_[i].closed = true;
    std::unordered_map<const void*, gc::handle>().swap(buckets_[i].entries);
  }
}

map_counters rwlock_map::counters() const {
  map_counters c;
  for (std::size_t i = 0; i < bucket_count(); ++i) {
    std::shared_lock<std::shared_mutex> lock(buckets_[i].lock);
    c.entries += buckets_[i].entries.size();
    c.dead_replaced += buckets_[i].dead_replaced;
  }
  return c;
}

// --- pybind11_map ---

pybind11_map::pybind11_map(std::size_t shards)
    : mask_(round_up_to_power_of_two(shards ? (shards > 4096 ? 4096 : shards)
                                            : 2 * std::size_t{std::max(1u, std::thread::hardware_concurrency())}) -
            1),
      shards_(new shard[mask_ + 1]) {}

pybind11_map::shard& pybind11_map::shard_for(const void* identity) const noexcept {
  return shards_[pybind11_shard(identity, mask_)];
}

gc::object* pybind11_map::find(const void* identity) const noexcept {
  shard& s = shard_for(identity);
  std::lock_guard<std::mutex> lock(s.lock);
  auto [first, last] = s.entries.equal_range(identity);
  for (auto it = first; it != last; ++it)
    if (gc::object* w = live_target(it->second)) return w;
  return nullptr;
}

gc::ref<gc::object> pybind11_map::insert(const void* identity, attach_fn attach, void* context) {
  shard& s = shard_for(identity);
  std::lock_guard<std::mutex> lock(s.lock);
  gc::read_section section;
  auto [first, last] = s.entries.equal_range(identity);
  for (auto it = first; it != last; ++it)
    if (gc::ref<gc::object> winner = take_live_target(it->second)) return winner;
  // The multimap keeps one entry per registration; the dead ones for this identity go now.
  auto fresh = s.entries.emplace(identity, gc::handle{});  // may throw: nothing changed
  gc::handle handle;
  try {
    handle = attach(context);
  } catch (...) {
    s.entries.erase(fresh);
    throw;
  }
  fresh->second = handle;
  std::size_t dropped = 0;
  std::tie(first, last) = s.entries.equal_range(identity);
  for (auto it = first; it != last;) {
    if (it != fresh) {
      it = s.entries.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  s.dead_replaced += dropped;
  return {};
}

bool pybind11_map::remove(const void* identity, gc::handle handle) noexcept {
  shard& s = shard_for(identity);
  std::lock_guard<std::mutex> lock(s.lock);
  if (s.closed) return false;
  auto [first, last] = s.entries.equal_range(identity);
  for (auto it = first; it != last; ++it)
    if (it->second == handle) {
      s.entries.erase(it);
      return true;
    }
  return false;
}

void pybind11_map::close() noexcept {
  for (std::size_t i = 0; i <= mask_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].lock);
    shards_[i].closed = true;
    std::unordered_multimap<const void*, gc::handle>().swap(shards_[i].entries);
  }
}

map_counters pybind11_map::counters() const {
  map_counters c;
  for (std::size_t i = 0; i <= mask_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].lock);
    c.entries += shards_[i].entries.size();
    c.dead_replaced += shards_[i].dead_replaced;
  }
  return c;
}

}  // namespace palrt::interop::internal

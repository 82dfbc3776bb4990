// SPDX-License-Identifier: MIT
// Each thread's caches of free handle slots, and the registry of live tables they return
// their slots to when the thread exits.
//
// The fast path is one thread-local compare (current_thread_cache): a thread's last table
// and its caches. Threads that use several tables switch the hint on the slow path. A thread
// owns its caches' memory; a table owns its blocks. When a thread exits, it returns its free
// slots, and the batches it left in their depots, to each table that still exists (under
// the registry's lock, which a table's destructor also takes, so the table cannot go away
// meanwhile); caches for tables already destroyed are simply dropped (their serial is never
// reused, so they can never be found).
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "palrt/gc/internal/handle_block.hpp"

namespace palrt::gc::internal {

namespace {

struct table_registry {
  std::mutex lock;
  std::unordered_map<std::uint64_t, handle_table_state*> tables;
};

// Never destroyed: threads may exit, and return their slots, after static destructors ran.
// Its lock is held across fork(), so that a child making or destroying tables never finds it
// held by a thread it does not have.
table_registry& registry() {
  static table_registry* instance = [] {
    auto* r = new table_registry;
    pal::internal::hold_across_fork(r->lock, pal::internal::fork_lock_rank::leaf);
    return r;
  }();
  return *instance;
}

constinit thread_local bool caches_returned = false;  // this thread is exiting

class thread_cache_owner {
 public:
  ~thread_cache_owner() {
    caches_returned = true;
    current_thread_cache = {0, nullptr};
    table_registry& r = registry();
    std::lock_guard lock(r.lock);
    for (auto& [serial, caches] : entries_) {
      auto table = r.tables.find(serial);
      if (table == r.tables.end()) continue;
      for (std::size_t k = 0; k < handle_kind_count; ++k) {
        handle_kind_state& kind = table->second->kinds[k];
        handle_cache& cache = caches->kinds[k];
        return_to_blocks(kind, cache, cache.count);
        // And the batches this thread parked on a shard nobody put to since: a thread on
        // another CPU that is still growing its working set does not take them
        // (batch_depot::take).
        while (kind.depot->take_left_by(&cache, cache)) return_to_blocks(kind, cache, cache.count);
      }
    }
  }

  handle_table_caches* find_or_add(std::uint64_t serial) {
    for (auto& [s, caches] : entries_)
      if (s == serial) return caches.get();
    if (entries_.size() >= 8) drop_dead_tables();
    auto caches = std::make_unique<handle_table_caches>();
    entries_.emplace_back(serial, std::move(caches));
    return entries_.back().second.get();
  }

 private:
  // A thread that outlives many tables (a test runner) would otherwise keep a cache for each.
  void drop_dead_tables() {
    table_registry& r = registry();
    std::lock_guard lock(r.lock);
    std::erase_if(entries_, [&](const auto& entry) { return !r.tables.contains(entry.first); });
  }
  std::vector<std::pair<std::uint64_t, std::unique_ptr<handle_table_caches>>> entries_;
};

}  // namespace
}  // namespace palrt::gc::internal

namespace palrt::gc::detail {
constinit thread_local thread_cache_hint current_thread_cache{0, nullptr};
}  // namespace palrt::gc::detail

namespace palrt::gc::internal {

handle_table_caches* thread_caches_slow(std::uint64_t serial) {
  if (caches_returned) return nullptr;
  static thread_local thread_cache_owner owner;
  handle_table_caches* caches = owner.find_or_add(serial);
  current_thread_cache = {serial, caches};
  return caches;
}

void register_table(std::uint64_t serial, handle_table_state* state) {
  table_registry& r = registry();
  std::lock_guard lock(r.lock);
  r.tables.emplace(serial, state);
}

void unregister_table(std::uint64_t serial) noexcept {
  table_registry& r = registry();
  std::lock_guard lock(r.lock);
  r.tables.erase(serial);
}

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// An identity cache's state, shared (std::shared_ptr) by the cache and every record it made:
// a record may be finalized after its cache is gone, and then finds the map closed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "palrt/interop/identity_cache.hpp"
#include "palrt/interop/internal/cache_design.hpp"
#include "palrt/interop/internal/bucket_map.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/interop/internal/entry_map.hpp"
#include "palrt/interop/internal/weak_object_table.hpp"

namespace palrt::interop::internal {

// Only the cache makes records (wrapper_record's constructor asks for one of these).
class record_key {
  friend class palrt::interop::identity_cache;
  record_key() = default;
};

struct cache_state {
  cache_state(gc::collector& c, const cache_options& o, cache_design d, std::uint64_t cache_id);

  gc::collector& collector;
  gc::handle_table& table;
  const cache_options options;
  const cache_design design;
  const std::uint64_t id;
  const std::unique_ptr<entry_map> map;
  // Outbound wrappers of objects whose field another cache owns, or that have none.
  weak_object_table outbound;

  std::atomic<bool> open{true};  // false once the cache is being destroyed
  // In a fork()ed child the cache is its parent's (identity_cache.hpp, "After fork()").
  const pal::internal::fork_stamp made;
  std::atomic<std::uint64_t> inserted{0};
  std::atomic<std::uint64_t> races_lost{0};
  std::atomic<std::uint64_t> removed{0};
};

// Tests' access (the one friend class of the cache).
class identity_cache_access {
 public:
  // A cache of one of the designs palrt is measured against (cache_design.hpp).
  static identity_cache make(gc::collector& collector, cache_design design, cache_options options = {}) {
    return identity_cache(collector, std::move(options), design);
  }
  static cache_design design(const identity_cache& c) noexcept { return c.state_->design; }
  static cache_state& state(identity_cache& c) noexcept { return *c.state_; }
  static entry_map& map(identity_cache& c) noexcept { return *c.state_->map; }
  // A record's wrapper field link and side-table key, for tests of the fallback path.
  static const void* side_table_key(const wrapper_record& r) noexcept { return r.side_table_key_; }

  // The palrt design's map, or null for the designs it is measured against.
  static bucket_map* buckets(identity_cache& c) noexcept { return dynamic_cast<bucket_map*>(c.state_->map.get()); }
  // From now on every reclaim of `m` calls o->scanned() between its scan and its
  // lock; null stops it. `o` must outlive the reclaims that may call it.
  static void watch_reclaims(bucket_map& m, reclaim_observer* o) noexcept { m.retired_.watch(o); }
  // The table a reader of `identity`'s bucket loads now (A' in bucket_map.cpp).
  static bucket_table* table_of(const bucket_map& m, const void* identity) noexcept {
    const std::size_t b = detail::bucket_of(detail::fibonacci_hash(identity), m.bucket_bits_);
    return m.view_.tables[b].load(std::memory_order_acquire);
  }
  // Whether `t` waits in the retired list, not freed yet. Compares addresses only, so it may
  // be asked about a table that was freed.
  static bool is_retired(bucket_map& m, const bucket_table* t) { return m.retired_.contains(t); }
  // The writer lock of the bucket `identity` falls in (palrt design), held by the caller:
  // fork tests hold it while another thread forks. Throws std::invalid_argument for the
  // other designs.
  static std::unique_lock<std::mutex> hold_bucket_lock(identity_cache& c, const void* identity);
};

}  // namespace palrt::interop::internal

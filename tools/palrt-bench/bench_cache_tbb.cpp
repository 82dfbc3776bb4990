// SPDX-License-Identifier: MIT
// palrt-bench cache, peer `tbb`: oneTBB's tbb::concurrent_hash_map (Debian libtbb-dev) from
// identity to the wrapper's weak handle. A hit: find() with a const_accessor (it holds the
// entry's read lock while it lives: an atomic read-modify-write on the lock and one to
// release it), copy the handle, release the accessor; then the handle's target and consume().

#include <cstddef>
#include <memory>
#include <stdexcept>

#include <oneapi/tbb/concurrent_hash_map.h>

#include "bench_cache.hpp"

namespace palrt::bench::cache {

namespace {

struct identity_hash_compare {
  static std::size_t hash(const void* identity) noexcept { return peer_hash(identity); }
  static bool equal(const void* a, const void* b) noexcept { return a == b; }
};

using tbb_map = tbb::concurrent_hash_map<const void*, gc::handle, identity_hash_compare>;

}  // namespace

measured_variant tbb_hit_variant(const peer_inputs& inputs) {
  const auto& ids = *inputs.identities;
  // Sized for its entries up front, as a user who knows them would.
  auto map = std::make_shared<tbb_map>(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!map->insert({ids[i], inputs.handles[i]})) throw std::runtime_error("tbb: an identity was inserted twice");
  }
  return hit_variant("tbb", inputs.identities, inputs.team, [map](const void* id) {
    gc::handle h;
    {
      tbb_map::const_accessor entry;
      if (map->find(entry, id)) h = entry->second;
    }
    return consume(h ? gc::handle_table::target(h) : nullptr);
  });
}

}  // namespace palrt::bench::cache

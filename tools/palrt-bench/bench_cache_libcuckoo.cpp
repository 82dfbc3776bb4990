// SPDX-License-Identifier: MIT
// palrt-bench cache, peer `libcuckoo`: libcuckoo::cuckoohash_map (Debian libcuckoo-dev,
// header-only) from identity to the wrapper's weak handle. A hit: find(key, out), which
// locks the key's two candidate buckets (spinlocks: an atomic read-modify-write each, and a
// store each to release them) and copies the handle out; then the handle's target and
// consume().

#include <cstddef>
#include <memory>
#include <stdexcept>

#include <libcuckoo/cuckoohash_map.hh>

#include "bench_cache.hpp"

namespace palrt::bench::cache {

namespace {

struct identity_hasher {
  std::size_t operator()(const void* identity) const noexcept { return peer_hash(identity); }
};

using cuckoo_map = libcuckoo::cuckoohash_map<const void*, gc::handle, identity_hasher>;

}  // namespace

measured_variant libcuckoo_hit_variant(const peer_inputs& inputs) {
  const auto& ids = *inputs.identities;
  // Sized for its entries (the default reserves 2^18 slots and their locks).
  auto map = std::make_shared<cuckoo_map>(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!map->insert(ids[i], inputs.handles[i])) throw std::runtime_error("libcuckoo: an identity was inserted twice");
  }
  return hit_variant("libcuckoo", inputs.identities, inputs.team, [map](const void* id) {
    gc::handle h;
    return consume(map->find(id, h) ? gc::handle_table::target(h) : nullptr);
  });
}

}  // namespace palrt::bench::cache

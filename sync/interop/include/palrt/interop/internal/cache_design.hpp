// SPDX-License-Identifier: MIT
// Benchmark baselines only (never installed; palrt/startup/internal/baselines.hpp gathers
// them): the identity cache's designs. `palrt` is what identity_cache is (identity_cache.hpp).
// The others are kept so that `palrt-bench cache` compares them in one run, with the same
// records, handles and contracts: `bucketed_rwlock` (per bucket, one reader-writer lock and
// one hash map), `single_lock` (one reader-writer lock and one hash map for the whole cache)
// and `pybind11_shards` (pybind11's registered-instances map for free-threaded Python:
// shards = RoundUpToPowerOf2(2 x hardware threads), one mutex and one unordered_multimap
// each, chosen by splitmix64(address >> 20)). A cache of another design is made with
// identity_cache_access::make (internal/cache_state.hpp).
#pragma once

#include <cstdint>

namespace palrt::interop::internal {

enum class cache_design : std::uint8_t { palrt, bucketed_rwlock, single_lock, pybind11_shards };
// "palrt", "bucketed-rwlock", "single-lock", "pybind11-shards"
const char* cache_design_name(cache_design design) noexcept;

}  // namespace palrt::interop::internal

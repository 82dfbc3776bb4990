// SPDX-License-Identifier: MIT
// A dispatch_cache's state (dispatch_tables.hpp, dispatch_cache.cpp), and the key that only
// palrt's own code can make dispatch tables and views with.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/internal/dispatch_view_map.hpp"
#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::interop::internal {

// dispatch_table's and exposed_interfaces' constructors ask for one: only palrt makes them.
class dispatch_key {
  friend const dispatch_table& detail::build_dispatch_table(const type_descriptor& type);
  friend class palrt::interop::dispatch_cache;
  dispatch_key() = default;
};

struct dispatch_cache_state {
  explicit dispatch_cache_state(const dispatch_policy& p) : policy(p) {}

  const dispatch_policy policy;
  // Taken to add a view, and to claim a type's L1; never while calling the policy.
  std::mutex writer;
  dispatch_view_map views_by_type;  // lock-free reads
  // Under `writer`: the views this instance owns, and the descriptors whose L1 it claimed.
  std::vector<std::unique_ptr<exposed_interfaces>> views;
  std::vector<const type_descriptor*> l1_claimed;

  // relaxed: counters for tests and diagnostics; nothing is ordered by them.
  std::atomic<std::uint64_t> views_built{0};      // kept: one per type this instance has seen
  std::atomic<std::uint64_t> views_discarded{0};  // built by a thread that lost the race to keep one
  std::atomic<std::uint64_t> l1_claims{0};

  // In a fork()ed child the instance is its parent's: `writer` may be held for good there.
  const pal::internal::fork_stamp made;
};

}  // namespace palrt::interop::internal

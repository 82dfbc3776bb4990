// SPDX-License-Identifier: MIT
// What tests reach in the dispatch tables beyond their public API (dispatch_tables.hpp): the
// counters that prove "built once, never rebuilt", and the L1 as a descriptor holds it.
#pragma once

#include <cstdint>

#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/internal/dispatch_cache_state.hpp"

namespace palrt::interop::internal {

// dispatch_tables.cpp: process-wide tables built since the process started.
std::uint64_t dispatch_tables_built() noexcept;

class dispatch_tables_access {
 public:
  static std::uint64_t tables_built() noexcept { return dispatch_tables_built(); }
  // The type's table if some call has built it, else null (never builds).
  static const dispatch_table* published_table(const type_descriptor& type) noexcept {
    return type.palrt_state.table.load(std::memory_order_acquire);
  }

  static std::uint64_t views_built(const dispatch_cache& c) noexcept {
    return c.state_->views_built.load(std::memory_order_relaxed);
  }
  static std::uint64_t views_discarded(const dispatch_cache& c) noexcept {
    return c.state_->views_discarded.load(std::memory_order_relaxed);
  }
  static std::uint64_t l1_claims(const dispatch_cache& c) noexcept {
    return c.state_->l1_claims.load(std::memory_order_relaxed);
  }

  // The calling thread's counts, over every instance.
  static std::uint64_t l1_hits_on_this_thread() noexcept { return detail::dispatch_lookups.l1_hits; }
  static std::uint64_t fallback_lookups_on_this_thread() noexcept { return detail::dispatch_lookups.fallback_lookups; }

  // The id of the instance holding the type's L1 (0: none), and the view it holds there.
  static std::uint64_t l1_owner(const type_descriptor& type) noexcept {
    return type.palrt_state.l1_owner.load(std::memory_order_acquire);
  }
  static const exposed_interfaces* l1_view(const type_descriptor& type) noexcept {
    return type.palrt_state.l1_view.load(std::memory_order_acquire);
  }
};

}  // namespace palrt::interop::internal

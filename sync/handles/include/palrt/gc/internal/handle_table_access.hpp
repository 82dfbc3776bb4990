// SPDX-License-Identifier: MIT
// What tests reach in the handle table beyond its public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "palrt/gc/handle_table.hpp"

namespace palrt::gc::internal {

class handle_table_access {
 public:
  // The next `n` block allocations of `table` fail as if memory were exhausted.
  static void fail_block_allocations(handle_table& table, int n) noexcept;
  // A handle value that points at `address` (for misuse tests: a pointer that is no handle).
  static handle forge(void* address) noexcept { return handle(static_cast<std::atomic<void*>*>(address)); }
  // Free slots in the calling thread's cache of `table` for `kind`.
  static std::size_t cached_free_slots(const handle_table& table, handle_kind kind);
  static std::size_t slots_per_block() noexcept;
  // The lock of `kind` in `table` (refills and growth take it), held by the caller: fork
  // tests hold it while another thread forks.
  static std::unique_lock<std::mutex> hold_kind_lock(handle_table& table, handle_kind kind);
  // The lock that block growth takes to record a new block (a stopped thread may hold it).
  static std::unique_lock<std::mutex> hold_all_blocks_lock(handle_table& table);
  // Threads waiting in a gated read for the gate to open.
  static std::uint32_t gate_waiters(const handle_table& table) noexcept;
  // Called by the out-of-line gated read (gated_secondary) between its reads and its second
  // look at the gate: a test closes the gate there. Set it while no gated read runs.
  static void set_gated_read_hook(handle_table& table, void (*hook)(void*), void* context) noexcept;
  // Called by for_each_secondary_of after each node of a chain it reads (indexed tables):
  // a test releases and reallocates handles there. Set it while no lookup runs.
  static void set_dependent_traversal_hook(handle_table& table, void (*hook)(void*), void* context) noexcept;
  static std::size_t dependent_index_buckets(const handle_table& table) noexcept;
  // The bucket `primary` falls in (in the index's current table).
  static std::size_t dependent_index_bucket(const handle_table& table, const void* primary) noexcept;
  // The index's lock (linking and unlinking take it), held by the caller: "a stopped thread".
  static std::unique_lock<std::mutex> hold_dependent_index_lock(handle_table& table);
};

}  // namespace palrt::gc::internal

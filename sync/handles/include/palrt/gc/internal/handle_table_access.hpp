// SPDX-License-Identifier: MIT
// What tests reach in the handle table beyond its public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "palrt/gc/handle_table.hpp"

namespace palrt::gc::internal {

class handle_table_access {
 public:
  // The next `n` block allocations of `table` fail as if memory were exhausted.
  static void fail_block_allocations(handle_table& table, int n) noexcept;
  // The next `n` allocations of a new dependent block's secondaries fail, after the block's
  // memory was carved from the table's chunks (which must take it back).
  static void fail_secondaries_allocations(handle_table& table, int n) noexcept;
  // A handle value that points at `address` (for misuse tests: a pointer that is no handle).
  static handle forge(void* address) noexcept { return handle(static_cast<std::atomic<void*>*>(address)); }
  // Free slots in the calling thread's cache of `table` for `kind`.
  static std::size_t cached_free_slots(const handle_table& table, handle_kind kind);
  // Their addresses, oldest first (a return to the depot takes the oldest batch).
  static std::vector<const void*> cached_slots(const handle_table& table, handle_kind kind);
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
  // Called by for_each_slot between finding a slot in use and handing it to the visit (a
  // test releases the handle there, from another thread). Set it while no walk runs.
  static void set_slot_walk_hook(handle_table& table, void (*hook)(void*), void* context) noexcept;
  // Called by the out-of-line allocate() and by set_secondary() between a store's first look
  // at its block's age and the store (the window a signal-stopped thread may sit in while a
  // collection ages the block). Set it while no allocate or set_secondary runs.
  static void set_age_window_hook(handle_table& table, void (*hook)(void*), void* context) noexcept;
  // The age of the block that holds `h` (handle_table.hpp, "Generations").
  static std::uint8_t block_age(handle h) noexcept;
  // Called by for_each_secondary_of after each node of a chain it reads (indexed tables):
  // a test releases and reallocates handles there. Set it while no lookup runs.
  static void set_dependent_traversal_hook(handle_table& table, void (*hook)(void*), void* context) noexcept;
  static std::size_t dependent_index_buckets(const handle_table& table) noexcept;
  // The bucket `primary` falls in (in the index's current table).
  static std::size_t dependent_index_bucket(const handle_table& table, const void* primary) noexcept;
  // The index's lock (linking and unlinking take it), held by the caller: "a stopped thread".
  static std::unique_lock<std::mutex> hold_dependent_index_lock(handle_table& table);

  // --- The depot of free-slot batches of each kind (internal/batch_depot.hpp) ---
  // Gives `kind` a fresh depot of `shards` shards and room for `max_batches` batches (rounded
  // up to whole chunks), in place of the one sized by the machine; before any thread released
  // or allocated a handle of that kind.
  static void use_depot(handle_table& table, handle_kind kind, std::size_t shards, std::size_t max_batches);
  static std::size_t depot_shards(const handle_table& table, handle_kind kind) noexcept;
  static std::size_t depot_capacity(const handle_table& table, handle_kind kind) noexcept;  // batches
  // Containers the depot made (full, empty or held), while no thread uses the depot.
  static std::size_t depot_containers(const handle_table& table, handle_kind kind) noexcept;
  // Full batches in the depot (on shard `shard` only, if not -1): walks its stacks, while no
  // thread uses the depot.
  static std::size_t depot_full_batches(const handle_table& table, handle_kind kind, int shard = -1) noexcept;
  // The calling thread's home shard in every depot (-1: the CPU it runs on, as normally).
  static void set_depot_home_shard(int shard) noexcept;
  // The calling thread's run of blocks when it carves one (block_chunks.hpp; -1: its CPU's, as
  // normally), in every table.
  static void set_block_run(int run) noexcept;
  // Called by every pop of the depot's stacks after it read the top's successor and before
  // its compare-exchange (a test stalls a pop there: the ABA window). Set it while no thread
  // uses the depot, or to null at any time.
  static void set_depot_pop_hook(handle_table& table, handle_kind kind, void (*hook)(void*), void* context) noexcept;
  // Called while a refill (take) or a return (put) holds a batch that is on no stack: after
  // take popped a full batch and before it copied it out; after put copied the cache's slots
  // into a container and before it removed them from the cache and published the batch.
  static void set_depot_transit_hook(handle_table& table, handle_kind kind, void (*hook)(void*),
                                     void* context) noexcept;
};

}  // namespace palrt::gc::internal

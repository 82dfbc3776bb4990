// SPDX-License-Identifier: MIT
// The part of the identity map both cache modes share: bucket tables (detail/
// identity_fast_path.hpp has their layout, which the inline hit paths read), how they are
// sized, made and freed, and the list of replaced tables waiting for a grace period. The
// embedded mode's map is bucket_map.cpp, the host mode's host_identity_map.cpp; each keeps its
// own rules for what a slot may hold, on top of these.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "palrt/interop/detail/identity_fast_path.hpp"

namespace palrt::interop::internal {

using detail::bucket_table;

inline constexpr unsigned min_slot_bits = 3;  // 8 entries, two cache lines
inline constexpr unsigned max_bucket_bits = 12;

// log2 of the bucket count for a requested count (rounded up to a power of two, at most 4096).
unsigned bucket_bits_for(std::size_t buckets) noexcept;
// The slot bits of a table with room for `keys` keys and as many inserts again before the
// next rebuild (keys + 1 at most half full).
unsigned slot_bits_for(std::size_t keys) noexcept;
// A table of 2^slot_bits empty entries (std::bad_alloc if that fails).
bucket_table* create_table(unsigned slot_bits);
void destroy_table(bucket_table* t) noexcept;
std::size_t table_bytes(const bucket_table& t) noexcept;
// A table may take keys and tombstones up to 3/4 of its slots: so a probe always ends at an
// empty slot.
inline bool has_room_for_one_more(const bucket_table& t, std::size_t used) noexcept {
  return (used + 1) * 4 <= (t.mask + 1) * 3;
}
// A writer's probe (under the lock every writer of `t` holds, or the host's): the slot holding
// `key`, or -1.
std::ptrdiff_t slot_of(const bucket_table& t, const void* key, std::uint64_t hash, unsigned bucket_bits) noexcept;
// The first empty-or-matching slot of `key`'s probe sequence in a table nobody else writes.
std::size_t first_free_slot(const bucket_table& t, std::uint64_t hash, unsigned bucket_bits) noexcept;

// Tests' view of a reclaim (set through identity_cache_access or host_cache_access):
// reclaim() calls scanned() after its scan of the readers and before it takes the list's
// lock, the window the protocol in bucket_map.cpp closes. It may block (to let other threads
// act in the window).
class reclaim_observer {
 public:
  virtual void scanned() noexcept = 0;

 protected:
  ~reclaim_observer() = default;
};

// Replaced tables waiting for a grace period (read sections, read_section.hpp), linked
// through bucket_table::next_retired: retiring allocates nothing, so it cannot fail halfway
// through a rebuild. The argument for why reclaim() frees no table a reader may still probe
// is at the top of bucket_map.cpp ((R1), (R2)).
class retired_tables {
 public:
  retired_tables() = default;
  retired_tables(const retired_tables&) = delete;
  retired_tables& operator=(const retired_tables&) = delete;
  ~retired_tables() { free_all(); }

  // Call after the table's replacement was published (A): tags it (B'') and queues it.
  void retire(bucket_table* t) noexcept;
  // Whether enough waits to be worth a grace period: one process-wide barrier per batch.
  bool due() const noexcept;
  // (R1) the scan, then (R2) the walk: frees what no reader can still be probing.
  void reclaim();
  // Frees everything: nobody reads any more (the map is being destroyed).
  void free_all() noexcept;
  std::size_t count() const noexcept;
  bool contains(const bucket_table* t) const noexcept;  // compares addresses only
  void watch(reclaim_observer* o) noexcept {
    // release: pairs with reclaim()'s acquire (the observer as built).
    observer_.store(o, std::memory_order_release);
  }

 private:
  mutable std::mutex lock_;
  bucket_table* head_ = nullptr;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  // Null but in tests; read once per reclaim (a slow path: a barrier follows).
  std::atomic<reclaim_observer*> observer_{nullptr};
};

}  // namespace palrt::interop::internal

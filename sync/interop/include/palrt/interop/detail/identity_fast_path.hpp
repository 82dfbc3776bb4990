// SPDX-License-Identifier: MIT
// Not API: the layout palrt's identity map shares with the inline hit path of
// identity_cache.hpp (liburcu's `urcu/static` shape: the fast path is a few inline loads, the
// rest is out of line). Hosts include identity_cache.hpp, never this file; it may change in
// any release. The protocol, and why a reader may trust what it reads, is in
// sync/interop/bucket_map.cpp.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <bit>
#include <type_traits>
#include <cstddef>
#include <cstdint>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/object.hpp"

namespace palrt::interop::detail {

inline constexpr std::uint64_t fibonacci_multiplier = 0x9E3779B97F4A7C15ull;

// Multiply-shift hashing: 2^64 / phi, the high bits pick the bucket (bucket_hash.hpp).
inline std::uint64_t fibonacci_hash(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) * fibonacci_multiplier;
}
// The bucket of a hash, for 2^bucket_bits buckets (bucket_bits in 0..12).
inline std::size_t bucket_of(std::uint64_t hash, unsigned bucket_bits) noexcept {
  // A shift by 64 is undefined: one bucket takes no bits. The result has at most
  // bucket_bits bits, so it fits std::size_t as it is (no cast: on LP64 it would be useless).
  return bucket_bits == 0 ? 0 : hash >> (64 - bucket_bits);
}
// The first slot inside a bucket's table of 2^slot_bits slots: the bits below the bucket's,
// so keys that share a bucket do not collide again inside it.
inline std::size_t first_slot_of(std::uint64_t hash, unsigned bucket_bits, unsigned slot_bits) noexcept {
  return (hash << bucket_bits) >> (64 - slot_bits);  // slot_bits bits: fits std::size_t
}

// Keys no identity may take: empty slots (null) and tombstones (the top of the address
// space, never a user-space pointer). One compare: 0 and ~0 are the values v with v+1 <= 1.
inline const void* tombstone_key() noexcept { return reinterpret_cast<const void*>(~std::uintptr_t{0}); }
inline bool is_reserved_key(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) + 1 <= 1; }

// One bucket's table: 2^slot_bits entries after the header, shared by both modes of the
// cache. An entry is {key, value}: for identity_cache (the embedded mode) the value is the
// gc::handle of the wrapper's record, and a key goes empty -> identity -> tombstone and never
// back within one table (bucket_map.cpp); for host_identity_cache the value is the host's
// wrapper itself, and a tombstone is reused by a later insert (host_identity_map.cpp).
struct alignas(64) bucket_table {  // a line of its own: entries start on a line boundary
  struct entry {
    std::atomic<const void*> key{nullptr};
    std::atomic<void*> value{nullptr};
  };

  unsigned slot_bits = 0;
  std::size_t mask = 0;
  // The host mode's per-table sequence (a seqlock): odd while a writer changes entries, and
  // odd for good once the table is replaced. Unused by the embedded mode.
  std::atomic<std::uint64_t> seq{0};
  std::uint64_t retired_at = 0;          // the grace-period tag, once replaced
  bucket_table* next_retired = nullptr;  // link in the map's retired list
  entry* entries() noexcept { return reinterpret_cast<entry*>(this + 1); }
  const entry* entries() const noexcept { return reinterpret_cast<const entry*>(this + 1); }
};
static_assert(sizeof(bucket_table::entry) == 16, "two words per entry: the memory target of the host mode");

// The embedded mode's value: a gc::handle is one pointer, copied as its bits.
static_assert(sizeof(gc::handle) == sizeof(void*) && std::is_trivially_copyable_v<gc::handle>);
inline gc::handle handle_of_value(void* value) noexcept { return std::bit_cast<gc::handle>(value); }
inline void* value_of_handle(gc::handle h) noexcept { return std::bit_cast<void*>(h); }

// What a reader needs: the bucket count and the table pointers (read-mostly).
struct bucket_view {
  unsigned bucket_bits = 0;
  std::atomic<bucket_table*>* tables = nullptr;
};

// The live wrapper of `identity` (not reserved), or null; the caller is in a read section.
// Labels (A'), (B'), (C'), (D) match the writer's side in bucket_map.cpp.
inline gc::object* find_in_buckets(const bucket_view& view, const void* identity) noexcept {
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, view.bucket_bits);
  for (;;) {
    // acquire (A'): the table's entries as its writer wrote them before publishing it.
    const bucket_table* t = view.tables[b].load(std::memory_order_acquire);
    if (!t) return nullptr;
    std::size_t i = first_slot_of(hash, view.bucket_bits, t->slot_bits);
    bool retry = false;
    for (std::size_t probes = 0; probes <= t->mask; ++probes, i = (i + 1) & t->mask) {
      const bucket_table::entry& e = t->entries()[i];
      // acquire (B'): the handle was stored before the key.
      const void* key = e.key.load(std::memory_order_acquire);
      if (key == identity) {
        // relaxed: ordered by (B'); a slot's handle is written once, before its key.
        const gc::handle handle = handle_of_value(e.value.load(std::memory_order_relaxed));
        // (C'): handle_table::target() loads with acquire.
        auto* target = static_cast<gc::object*>(gc::handle_table::target(handle));
        // (D): relaxed, kept after (C') by its acquire: the entry is still current, so the
        // target is what the handle held while it was (bucket_map.cpp).
        if (e.key.load(std::memory_order_relaxed) != identity || view.tables[b].load(std::memory_order_relaxed) != t) {
          retry = true;
          break;
        }
        return target && gc::detail::object_access::alive(*target) ? target : nullptr;
      }
      if (!key) return nullptr;
    }
    if (!retry) return nullptr;
  }
}

}  // namespace palrt::interop::detail

// SPDX-License-Identifier: MIT
// Not API: the host mode's inline hit paths (host_identity_cache.hpp), over the bucket tables
// both modes share (identity_fast_path.hpp). Hosts include host_identity_cache.hpp, never this
// file; it may change in any release. The writers' side of the protocol, and why a reader may
// trust what it reads, is in sync/interop/host_identity_map.cpp.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "palrt/interop/detail/identity_fast_path.hpp"

namespace palrt::interop::detail {

// What host_find_concurrent() returns when a writer was at work in the bucket each time it
// looked: ask under the lock. Not a wrapper: the top of the address space.
inline void* host_writer_busy() noexcept { return reinterpret_cast<void*>(~std::uintptr_t{0}); }

// host_lock: the host's lock excludes every writer, so a plain probe. A table always has an
// empty slot (keys and tombstones fill at most 3/4), so the probe ends.
inline void* host_find_exclusive(const bucket_view& view, const void* identity) noexcept {
  const std::uint64_t hash = fibonacci_hash(identity);
  // relaxed: every write to the map happened under the host's lock, which the caller holds.
  const bucket_table* t = view.tables[bucket_of(hash, view.bucket_bits)].load(std::memory_order_relaxed);
  if (!t) return nullptr;
  const bucket_table::entry* e = t->entries();
  const std::size_t mask = t->mask;
  for (std::size_t i = first_slot_of(hash, view.bucket_bits, t->slot_bits);; i = (i + 1) & mask) {
    const void* key = e[i].key.load(std::memory_order_relaxed);
    if (key == identity) return e[i].value.load(std::memory_order_relaxed);
    if (!key) return nullptr;
  }
}

// grace_period, inside a read section (which keeps the table valid): the probe between two
// reads of the table's sequence (a seqlock reader). The wrapper the entry held, null if none,
// or host_writer_busy() if a writer of the bucket was at work every time.
inline void* host_find_concurrent(const bucket_view& view, const void* identity) noexcept {
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, view.bucket_bits);
  for (int attempt = 0; attempt < 4; ++attempt) {
    // acquire (A'): the table as its writer filled it before publishing it.
    const bucket_table* t = view.tables[b].load(std::memory_order_acquire);
    if (!t) return nullptr;
    // acquire (S1): the entries as of the last writer that made the sequence even.
    const std::uint64_t s = t->seq.load(std::memory_order_acquire);
    if (s & 1) {
      // A writer is at work, or the table was replaced (odd for good): look again if so.
      if (view.tables[b].load(std::memory_order_acquire) != t) continue;
      return host_writer_busy();
    }
    void* found = nullptr;
    std::size_t i = first_slot_of(hash, view.bucket_bits, t->slot_bits);
    const bucket_table::entry* e = t->entries();
    // Bounded: a writer may be rewriting the slots while we probe (we then discard the result).
    for (std::size_t probes = 0; probes <= t->mask; ++probes, i = (i + 1) & t->mask) {
      const void* key = e[i].key.load(std::memory_order_relaxed);
      if (key == identity) {
        found = e[i].value.load(std::memory_order_relaxed);
        break;
      }
      if (!key) break;
    }
    // (S2): the loads above come before the second read; if no writer began since (S1), they
    // read what (S1) made visible, nothing newer.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t->seq.load(std::memory_order_relaxed) == s) return found;
  }
  return host_writer_busy();
}

}  // namespace palrt::interop::detail

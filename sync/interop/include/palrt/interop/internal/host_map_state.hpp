// SPDX-License-Identifier: MIT
// The host mode's map state (host_identity_cache.hpp), and tests' access to it. The protocol
// is at the top of host_identity_map.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "palrt/interop/host_identity_cache.hpp"
#include "palrt/interop/internal/bucket_tables.hpp"
#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::interop::internal {

// Tests' view of a rebuild (grace_period): copying(wrapper) is called for each entry the
// rebuild copies, after it read the entry from the old table and before it stores it in the
// new one: the window a world-stopped sweep must not lose a removal in. It may run a sweep.
class rebuild_observer {
 public:
  virtual void copying(void* wrapper) noexcept = 0;

 protected:
  ~rebuild_observer() = default;
};

struct host_map_state {
  host_map_state(host_reclamation r, const host_cache_options& o, detail::host_hooks h);
  ~host_map_state();

  // Writers' state of one bucket, on a line of its own (grace_period: its lock; host_lock:
  // the host's lock covers it).
  struct alignas(64) writer {
    std::mutex lock;
    std::size_t used = 0;  // keys and tombstones in the current table
    std::uint64_t inserted = 0;
    std::uint64_t races_lost = 0;
    std::uint64_t dead_replaced = 0;
    std::uint64_t erased = 0;
    std::uint64_t reused_slots = 0;
    std::uint64_t rebuilds = 0;
  };

  const host_reclamation reclamation;
  const bool exclusive;  // host_lock
  const detail::host_hooks hooks;
  const unsigned bucket_bits;
  // The readers' only shared state: read-mostly (written when a table is replaced).
  std::unique_ptr<std::atomic<bucket_table*>[]> tables;
  // grace_period: the table a rebuild is filling, for a world-stopped sweep to see.
  std::unique_ptr<std::atomic<bucket_table*>[]> building;
  std::unique_ptr<writer[]> writers;
  retired_tables retired;
  // Written by sweeps only (the world stopped, or under the host's lock); read by counters().
  std::atomic<std::uint64_t> swept{0};
  std::atomic<rebuild_observer*> observer{nullptr};
  const pal::internal::fork_stamp made;

  std::size_t bucket_count() const noexcept { return std::size_t{1} << bucket_bits; }
};

class host_cache_access {
 public:
  template <class Policy>
  static host_map_state& state(host_identity_cache<Policy>& c) noexcept {
    return *c.core_.state_;
  }
  // From now on every rebuild calls o->copied() in its window; null stops it.
  static void watch_rebuilds(host_map_state& s, rebuild_observer* o) noexcept {
    s.observer.store(o, std::memory_order_release);
  }
  static std::size_t bucket_of(const host_map_state& s, const void* identity) noexcept {
    return detail::bucket_of(detail::fibonacci_hash(identity), s.bucket_bits);
  }
  // Moves the sequence of the bucket's current table by one: the first call makes it look as
  // if a writer were inside its window (odd), the next as if it had finished (even).
  static void step_sequence(host_map_state& s, const void* identity) noexcept {
    bucket_table* t = s.tables[bucket_of(s, identity)].load(std::memory_order_acquire);
    if (t) t->seq.fetch_add(1, std::memory_order_acq_rel);
  }
};

}  // namespace palrt::interop::internal

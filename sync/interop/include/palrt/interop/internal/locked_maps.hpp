// SPDX-License-Identifier: MIT
// The identity maps palrt's design is measured against (identity_cache.hpp, "Designs"):
// - rwlock_map: buckets of one reader-writer lock and one std::unordered_map each, the
//   bucket chosen by Fibonacci hashing. With the processor count's buckets it is the design
//   palrt's grew from (a lock and a dictionary per bucket); with one bucket it is the design
//   before that (one lock for the whole cache).
// - pybind11_map: pybind11's registered-instances map for free-threaded Python, written from
//   its description: RoundUpToPowerOf2(2 x hardware threads) shards, each one mutex and one
//   std::unordered_multimap padded to a multiple of 64 bytes, the shard chosen by
//   splitmix64(address >> 20) (objects of one allocator arena share a shard on purpose).
// Both follow entry_map's protocol; a hit takes the lock in shared (rwlock_map) or exclusive
// (pybind11_map) mode, which writes the lock's line.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "palrt/interop/internal/entry_map.hpp"

namespace palrt::interop::internal {

class rwlock_map final : public entry_map {
 public:
  explicit rwlock_map(std::size_t buckets);
  gc::object* find(const void* identity) const noexcept override;
  gc::ref<gc::object> insert(const void* identity, attach_fn attach, void* context) override;
  bool remove(const void* identity, gc::handle handle) noexcept override;
  void close() noexcept override;
  map_counters counters() const override;
  std::size_t bucket_count() const noexcept override { return std::size_t{1} << bucket_bits_; }

 private:
  struct alignas(64) bucket {
    mutable std::shared_mutex lock;
    std::unordered_map<const void*, gc::handle> entries;
    std::uint64_t dead_replaced = 0;
    bool closed = false;
  };
  bucket& bucket_for(const void* identity) const noexcept;

  const unsigned bucket_bits_;
  std::unique_ptr<bucket[]> buckets_;
};

class pybind11_map final : public entry_map {
 public:
  // shards: 0 for RoundUpToPowerOf2(2 x std::thread::hardware_concurrency()).
  explicit pybind11_map(std::size_t shards);
  gc::object* find(const void* identity) const noexcept override;
  gc::ref<gc::object> insert(const void* identity, attach_fn attach, void* context) override;
  bool remove(const void* identity, gc::handle handle) noexcept override;
  void close() noexcept override;
  map_counters counters() const override;
  std::size_t bucket_count() const noexcept override { return mask_ + 1; }

 private:
  struct alignas(64) shard {
    mutable std::mutex lock;
    std::unordered_multimap<const void*, gc::handle> entries;
    std::uint64_t dead_replaced = 0;
    bool closed = false;
  };
  static_assert(sizeof(shard) % 64 == 0);
  shard& shard_for(const void* identity) const noexcept;

  const std::size_t mask_;
  std::unique_ptr<shard[]> shards_;
};

}  // namespace palrt::interop::internal

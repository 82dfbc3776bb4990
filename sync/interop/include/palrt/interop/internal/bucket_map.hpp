// SPDX-License-Identifier: MIT
// palrt's design of the identity map: per-processor buckets of open-addressing tables whose
// hits are lock-free and write nothing shared. The protocol is in bucket_map.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "palrt/interop/detail/identity_fast_path.hpp"
#include "palrt/interop/internal/bucket_tables.hpp"
#include "palrt/interop/internal/entry_map.hpp"

namespace palrt::interop::internal {

class identity_cache_access;

class bucket_map final : public entry_map {
 public:
  explicit bucket_map(std::size_t buckets);
  ~bucket_map() override;

  gc::object* find(const void* identity) const noexcept override { return detail::find_in_buckets(view_, identity); }
  // What identity_cache's inline hit path reads (valid for the map's life).
  const detail::bucket_view& view() const noexcept { return view_; }
  gc::ref<gc::object> insert(const void* identity, attach_fn attach, void* context) override;
  bool remove(const void* identity, gc::handle handle) noexcept override;
  void close() noexcept override;
  map_counters counters() const override;
  std::size_t bucket_count() const noexcept override { return std::size_t{1} << bucket_bits_; }

  static const void* tombstone() noexcept { return detail::tombstone_key(); }

 private:
  friend class identity_cache_access;  // hold_bucket_lock
  // Writers' state of one bucket, on a line of its own: a writer taking the lock must not
  // invalidate the line readers load the table pointer from (tables_).
  struct alignas(64) bucket_writer {
    std::mutex lock;
    std::size_t used = 0;  // keys and tombstones in the current table
    std::size_t live = 0;  // keys
    std::size_t tombstones = 0;
    std::uint64_t rebuilds = 0;
    std::uint64_t dead_replaced = 0;
    bool closed = false;
  };

  // Under the bucket's lock: a table with room for one more key, replacing the current one
  // if needed; the replaced one is retired (freed after a grace period).
  bucket_table* make_room(std::size_t b, bucket_writer& w);

  const unsigned bucket_bits_;
  // The readers' only shared state: read-mostly (written when a table is replaced).
  std::unique_ptr<std::atomic<bucket_table*>[]> tables_;
  std::unique_ptr<bucket_writer[]> writers_;
  const detail::bucket_view view_;

  retired_tables retired_;
};

}  // namespace palrt::interop::internal

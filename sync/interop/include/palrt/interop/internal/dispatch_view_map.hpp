// SPDX-License-Identifier: MIT
// A dispatch_cache's map from type descriptor to its view (dispatch_tables.hpp), the
// fallback of the L1: read without a lock by every thread that uses the instance, written
// under the instance's lock.
//
// Protocol:
// - The map is an open-addressing table of view pointers, the key being the view's own
//   type(): a slot is empty (null) or holds a view that never changes or leaves. Linear
//   probing from the descriptor's Fibonacci hash (bucket_hash.hpp: descriptors are aligned
//   objects, their low bits constant), at most half full.
// - insert(): the writer (one at a time, holding the instance's lock) stores the view into
//   an empty slot with release (A); a reader that loads it with acquire (A') sees the view
//   built. A reader that misses a view being inserted finds it under the lock (the slow path
//   looks again there).
// - Growing: the writer fills a table twice the size privately, then publishes it with
//   release (B); readers load the current table with acquire (B'). The table it replaces is
//   kept, unchanged, until the map is destroyed: a reader may still be probing it, and a
//   reader of an old table sees a subset of the views, so at worst it misses and takes the
//   lock. Kept tables add up to less than the current one (sizes double).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "palrt/interop/dispatch_tables.hpp"

namespace palrt::interop::internal {

class dispatch_view_map {
 public:
  dispatch_view_map();
  dispatch_view_map(const dispatch_view_map&) = delete;
  dispatch_view_map& operator=(const dispatch_view_map&) = delete;
  ~dispatch_view_map();

  // The view of `type`, or null. Lock-free; any thread.
  const exposed_interfaces* find(const type_descriptor& type) const noexcept;
  // Adds `view`, whose type must not be in the map yet. The caller holds the instance's
  // lock. Throws std::bad_alloc if the map must grow and cannot: the map is unchanged then.
  void insert(const exposed_interfaces& view);
  std::size_t size() const noexcept { return size_; }  // under the instance's lock

 private:
  struct table;
  static std::unique_ptr<table> make_table(unsigned bits);
  static void place(const table& t, const exposed_interfaces& view) noexcept;

  std::atomic<const table*> current_;
  std::vector<std::unique_ptr<table>> tables_;  // every table made, current last
  std::size_t size_ = 0;
};

}  // namespace palrt::interop::internal

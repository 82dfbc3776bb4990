// SPDX-License-Identifier: MIT
// The checked builds' membership test for a table's blocks: "is this pointer a block of this
// table?" before a checked release, kind() or secondary() touches it. Lock-free to read, so
// that those calls take no lock a stopped thread can hold (a host calls secondary() with the
// world stopped, while any thread may be stopped inside allocate()).
//
// Insert-only: a table never frees a block while it lives. An open-addressing set of block
// addresses, at most half full; inserts (under the caller's lock) that would pass half make a
// table twice the size, copy every address into it and publish it; the replaced tables are
// kept until the set is destroyed (together at most as large as the current one), so a reader
// holding one never reads freed memory. A block is inserted before any handle of it exists,
// so a reader asking about a real handle's block finds it in whichever table it loads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace palrt::gc::internal {

class block_set {
 public:
  block_set() = default;
  block_set(const block_set&) = delete;
  block_set& operator=(const block_set&) = delete;
  ~block_set();

  // Under the caller's lock (one inserter at a time). Throws std::bad_alloc, leaving the set
  // as it was.
  void insert(const void* block);
  // From any thread, concurrently with insert(), with no lock.
  bool contains(const void* block) const noexcept;
  std::size_t size() const noexcept { return size_; }  // the inserter's view
  // The tables' memory, current and replaced (relaxed: a statistic, written by insert()).
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct table {
    std::size_t mask;
    std::unique_ptr<std::atomic<const void*>[]> slots;
  };
  static table* make_table(std::size_t capacity);
  static void put(table& t, const void* block) noexcept;

  std::atomic<table*> current_{nullptr};
  std::vector<std::unique_ptr<table>> tables_;  // every table made, the current one last
  std::size_t size_ = 0;
  std::atomic<std::size_t> bytes_{0};
};

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// Every block of one handle kind, by number in the order the kind added them, each with its
// age: what the walks (handle_walk.hpp) go through, claim in ranges (parallel walks) and
// filter by age (a young collection visits only the blocks its generations can be in).
//
// Why a directory and not the kind's list of blocks: a list can only be walked, one block
// after another, by one thread; numbered blocks are claimed by several GC threads with one
// fetch_add per range. And the ages sit apart from the blocks, one byte each, dense: a young
// collection with 100,000 old handles (834 blocks) reads 834 bytes, 14 cache lines, to find
// the few young blocks, instead of 834 block headers.
//
// Layout: pages of page_blocks entries (a block's address and its age), allocated as the kind
// grows and never moved or freed while the table lives, so a block's header keeps the address
// of its age byte (handle_block::age) and a mutator writes its age without finding the
// directory. The page table (an array of page addresses) is replaced by one twice as long
// when it is full; the old one stays until the table is destroyed (a walker may be reading it),
// so the page tables cost less than twice the last one.
//
// Protocol: add() runs under the kind's lock (refill), which makes the adders one at a time.
// It writes the entry and the page table, then publishes the block by storing the count
// (release: D). A walker loads the count (acquire: D'), then the page table: it sees every
// entry below the count, and a page table that covers them (the table that covered the
// count was stored before the count; any later one covers more).
// Ages are read and written relaxed: a generational walk runs with the world stopped (the
// host's stop orders them; handle_table.hpp, "Generations"); a full walk does not read them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "palrt/gc/detail/handle_fast_path.hpp"

namespace palrt::gc::internal {

class block_directory {
 public:
  static constexpr std::size_t page_blocks = 256;
  struct page {
    std::atomic<detail::handle_block*> blocks[page_blocks];
    std::atomic<std::uint8_t> ages[page_blocks];
  };

  block_directory() = default;
  block_directory(const block_directory&) = delete;
  block_directory& operator=(const block_directory&) = delete;
  ~block_directory();

  // Makes room for one more block, so that add() cannot fail. Under the kind's lock. Throws
  // std::bad_alloc (nothing changed then).
  void reserve_one();
  // Adds `block` (room reserved) with age `age`, sets the block's age pointer and publishes
  // it to walkers (D). Under the kind's lock, before any slot of the block is handed out.
  void add(detail::handle_block* block, std::uint8_t age) noexcept;

  // Blocks added so far (acquire: D').
  std::size_t size() const noexcept { return count_.load(std::memory_order_acquire); }
  // The block and age numbered `i` < size() (as read after size()).
  detail::handle_block* block(std::size_t i) const noexcept {
    return page_of(i)->blocks[i % page_blocks].load(std::memory_order_relaxed);
  }
  std::atomic<std::uint8_t>& age(std::size_t i) const noexcept { return page_of(i)->ages[i % page_blocks]; }
  // The first number in [i, end) whose age is at most `condemned`, or `end`.
  std::size_t next_condemned(std::size_t i, std::size_t end, std::uint8_t condemned) const noexcept;

  // The pages and page tables, retired ones included (relaxed: a statistic).
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

 private:
  page* page_of(std::size_t i) const noexcept {
    // acquire: the page table's contents (its page addresses) before they are read; it was
    // loaded after the count (D'), so it covers `i`.
    return pages_.load(std::memory_order_acquire)[i / page_blocks];
  }
  std::atomic<page**> pages_{nullptr};
  std::size_t page_capacity_ = 0;  // entries of *pages_ (under the kind's lock)
  std::size_t pages_used_ = 0;     // pages allocated (under the kind's lock)
  std::atomic<std::size_t> count_{0};
  std::atomic<std::size_t> bytes_{0};
  // Page tables replaced by larger ones, kept until destruction (a walker may read one).
  std::vector<std::unique_ptr<page*[]>> retired_;
  std::unique_ptr<page*[]> current_;
};

}  // namespace palrt::gc::internal

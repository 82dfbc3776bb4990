// SPDX-License-Identifier: MIT
// The directory of one kind's blocks (block_directory.hpp states the protocol).
#include "palrt/gc/internal/block_directory.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace palrt::gc::internal {

block_directory::~block_directory() {
  for (std::size_t p = 0; p < pages_used_; ++p) delete current_[p];
}

void block_directory::reserve_one() {
  const std::size_t n = count_.load(std::memory_order_relaxed);
  if (n < pages_used_ * page_blocks) return;
  // A new page, and first a page table with room for it.
  if (pages_used_ == page_capacity_) {
    const std::size_t capacity = page_capacity_ ? 2 * page_capacity_ : 4;
    auto table = std::make_unique<page*[]>(capacity);  // value-initialised: null pages
    if (current_) std::memcpy(table.get(), current_.get(), pages_used_ * sizeof(page*));
    retired_.reserve(retired_.size() + 1);  // before anything is published: nothing to undo after
    // release: the page addresses copied above before a walker that loads the new table.
    pages_.store(table.get(), std::memory_order_release);
    if (current_) retired_.push_back(std::move(current_));
    current_ = std::move(table);
    page_capacity_ = capacity;
    bytes_.fetch_add(capacity * sizeof(page*), std::memory_order_relaxed);
  }
  auto* p = new page;
  for (std::size_t i = 0; i < page_blocks; ++i) {
    p->blocks[i].store(nullptr, std::memory_order_relaxed);
    p->ages[i].store(0, std::memory_order_relaxed);
  }
  current_[pages_used_++] = p;  // published to walkers by the count that covers it (D)
  bytes_.fetch_add(sizeof(page), std::memory_order_relaxed);
}

void block_directory::add(detail::handle_block* block, std::uint8_t age) noexcept {
  const std::size_t n = count_.load(std::memory_order_relaxed);
  page* p = current_[n / page_blocks];
  p->blocks[n % page_blocks].store(block, std::memory_order_relaxed);
  p->ages[n % page_blocks].store(age, std::memory_order_relaxed);
  block->age = &p->ages[n % page_blocks];
  // D: release, the entry and the page table before a walker that sees the count.
  count_.store(n + 1, std::memory_order_release);
}

std::size_t block_directory::next_condemned(std::size_t i, std::size_t end, std::uint8_t condemned) const noexcept {
  while (i < end) {
    page* p = page_of(i);
    const std::size_t page_end = std::min(end, (i / page_blocks + 1) * page_blocks);
    for (; i < page_end; ++i) {
      if (p->ages[i % page_blocks].load(std::memory_order_relaxed) <= condemned) return i;
    }
  }
  return end;
}

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// The lock-free block membership set (internal/block_set.hpp).
#include "palrt/gc/internal/block_set.hpp"

namespace palrt::gc::internal {

namespace {

// Blocks are 1 KiB aligned: the bits above the alignment, spread by a Fibonacci multiply.
std::size_t home_of(const void* block, std::size_t mask) noexcept {
  return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(block) >> 10) * 0x9E3779B97F4A7C15u >> 20) & mask;
}

}  // namespace

block_set::~block_set() = default;

block_set::table* block_set::make_table(std::size_t capacity) {
  auto* t = new table{capacity - 1, std::make_unique<std::atomic<const void*>[]>(capacity)};
  for (std::size_t i = 0; i < capacity; ++i) t->slots[i].store(nullptr, std::memory_order_relaxed);
  return t;
}

void block_set::put(table& t, const void* block) noexcept {
  for (std::size_t i = home_of(block, t.mask);; i = (i + 1) & t.mask) {
    if (!t.slots[i].load(std::memory_order_relaxed)) {
      // release: nothing to publish but the address; readers compare it, never dereference.
      t.slots[i].store(block, std::memory_order_release);
      return;
    }
  }
}

void block_set::insert(const void* block) {
  table* t = current_.load(std::memory_order_relaxed);
  if (!t || 2 * (size_ + 1) > t->mask + 1) {
    const std::size_t capacity = t ? 2 * (t->mask + 1) : 64;
    tables_.reserve(tables_.size() + 1);  // the only other allocation: before anything changes
    std::unique_ptr<table> bigger(make_table(capacity));
    if (t)
      for (std::size_t i = 0; i <= t->mask; ++i)
        if (const void* b = t->slots[i].load(std::memory_order_relaxed)) put(*bigger, b);
    put(*bigger, block);
    // release: a reader that loads the new table sees it filled.
    current_.store(bigger.get(), std::memory_order_release);
    tables_.push_back(std::move(bigger));  // reserved: cannot throw
    bytes_.store(bytes_.load(std::memory_order_relaxed) + sizeof(table) + capacity * sizeof(std::atomic<const void*>),
                 std::memory_order_relaxed);
  } else {
    put(*t, block);
  }
  ++size_;
}

bool block_set::contains(const void* block) const noexcept {
  const table* t = current_.load(std::memory_order_acquire);
  if (!t || !block) return false;
  for (std::size_t i = home_of(block, t->mask), probes = 0; probes <= t->mask; i = (i + 1) & t->mask, ++probes) {
    const void* b = t->slots[i].load(std::memory_order_acquire);
    if (b == block) return true;
    if (!b) return false;
  }
  return false;
}

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// The buckets of dependent promotions (promotion_buckets.hpp states their use).
#include "palrt/gc/internal/promotion_buckets.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace palrt::gc::internal {

void promotion_buckets::free_table::operator()(table* t) const noexcept { std::free(t); }

promotion_buckets::~promotion_buckets() = default;

void promotion_buckets::reserve(std::size_t slots) {
  const std::size_t want = std::bit_ceil(std::max<std::size_t>(slots / 2, 64));
  table* old = current_.load(std::memory_order_relaxed);
  if (old && old->count >= want) return;
  tables_.reserve(tables_.size() + 1);  // before anything is published: nothing to undo after
  const std::size_t size = offsetof(table, heads) + want * sizeof(head);
  auto* t = static_cast<table*>(std::malloc(size));
  if (!t) throw std::bad_alloc();
  t->count = want;
  t->shift = 64u - static_cast<unsigned>(std::countr_zero(want));
  // Epoch 0 is never a promotion's: every head reads as empty.
  std::memset(t->heads, 0, want * sizeof(head));
  tables_.emplace_back(t);
  // release: the heads' initialisation before a promotion that loads the table.
  current_.store(t, std::memory_order_release);
  bytes_.fetch_add(size, std::memory_order_relaxed);
}

std::uint64_t promotion_buckets::next_epoch() noexcept {
  if (++epoch_ == (std::uint64_t{1} << (64 - epoch_shift))) {
    for (auto& t : tables_) std::memset(t->heads, 0, t->count * sizeof(head));
    epoch_ = 1;
  }
  return epoch_;
}

}  // namespace palrt::gc::internal

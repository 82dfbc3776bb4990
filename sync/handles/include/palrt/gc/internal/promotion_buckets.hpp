// SPDX-License-Identifier: MIT
// The buckets of a dependent_promotion (palrt/gc/dependent_promotion.hpp): the heads of the
// chains of pending dependent handles by primary, kept by the table so that a promotion, which
// runs with the world stopped, allocates nothing.
//
// A promotion links the dependent handles whose primary is not (yet) alive into chains by the
// primary's hash: a chain's head is here, its links beside the secondaries of the dependent
// blocks (one per slot, dependent_links()). Heads and links hold slot addresses, from which
// masking finds the block: a lookup is three dependent loads, not the five of a slot number
// decoded through the directory, which made a chain laid against the walk order cost 2.4x
// one laid with it (docs/BENCHMARKS.md). A head carries, in its top byte, the epoch of the
// promotion that wrote it (user-space addresses fit in 56 bits), and a head of another epoch
// reads as empty: the next promotion starts on clean buckets without clearing them, so a
// young collection's promotion costs what its condemned blocks hold, not what the whole
// table does. Every 255 promotions the epoch wraps and the heads are cleared once.
//
// Sizing: at least one bucket per two dependent slots (chains of two on average when every
// slot is pending), a power of two; grown by reserve() in the refill that adds a dependent
// block (under the dependent kind's lock, before the block is published), so that a promotion
// always finds room for every block it walks. A replaced table is kept until the table is
// destroyed (a promotion is world-stopped and a refill world-running, but a host that gets
// that wrong should read stale heads, not freed memory): at most as much again.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace palrt::gc::internal {

class promotion_buckets {
 public:
  // The epoch in the top byte, the chain's first slot (or null) below.
  using head = std::uint64_t;
  static constexpr unsigned epoch_shift = 56;
  static constexpr std::uint64_t address_mask = (std::uint64_t{1} << epoch_shift) - 1;
  // True if the slots of a block at `address` can be kept in a head (always, in Linux's user
  // space, unless palrt's blocks came from memory mapped above 2^56).
  static bool fits(const void* address) noexcept {
    return (reinterpret_cast<std::uintptr_t>(address) & ~address_mask) == 0;
  }
  struct table {
    unsigned shift;  // 64 - log2(buckets): the hash's top bits pick the bucket
    std::size_t count;
    head heads[1];  // `count` of them
  };

  promotion_buckets() = default;
  promotion_buckets(const promotion_buckets&) = delete;
  promotion_buckets& operator=(const promotion_buckets&) = delete;
  ~promotion_buckets();

  // Buckets for `slots` dependent slots (at least one per two slots). Under the dependent
  // kind's lock. Throws std::bad_alloc (nothing changed then).
  void reserve(std::size_t slots);
  // The current buckets, or null before the first dependent block (acquire: their
  // initialisation before they are read).
  table* current() const noexcept { return current_.load(std::memory_order_acquire); }
  // A new epoch for a promotion (one at a time, with the world stopped), 1 to 255. When the
  // counter wraps, every head is cleared first, so no old head reads as current.
  std::uint64_t next_epoch() noexcept;
  // The last epoch next_epoch() gave: the promotion that may use the buckets.
  std::uint64_t epoch() const noexcept { return epoch_; }
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct free_table {
    void operator()(table* t) const noexcept;
  };
  std::atomic<table*> current_{nullptr};
  std::uint64_t epoch_ = 0;
  std::atomic<std::size_t> bytes_{0};
  std::vector<std::unique_ptr<table, free_table>> tables_;  // the current one last
};

}  // namespace palrt::gc::internal

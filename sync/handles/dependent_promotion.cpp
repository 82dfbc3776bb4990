// SPDX-License-Identifier: MIT
// Dependent promotion in linear time (dependent_promotion.hpp states the contract).
//
// The chains: a pending handle's slot address is in its bucket's head (with the epoch in the
// top byte) or in the link of the slot before it (promotion_buckets.hpp); its bucket is the
// top bits of its primary times the Fibonacci constant (aligned pointers have constant low
// bits; the top bits of the product mix all of them). All of it is read and written by the
// one GC thread that runs the promotion, with the world stopped: plain loads and stores (the
// slots' targets are atomics, read acquire as every walk reads them).
#include "palrt/gc/dependent_promotion.hpp"

#include <stdexcept>
#include <string>

#include "palrt/gc/internal/handle_block.hpp"

namespace palrt::gc {

using detail::handle_block;
using internal::promotion_buckets;

namespace {

using slot_ptr = std::atomic<void*>*;

// A promotion used after a newer one was made on its table would read the newer one's
// chains as empty and miss what waits: refused, not answered wrongly.
void require_current(const internal::promotion_buckets& buckets, std::uint64_t epoch, const char* operation) {
  if ((buckets.epoch() << promotion_buckets::epoch_shift) != epoch)
    throw std::logic_error(std::string("palrt: dependent_promotion::") + operation +
                           ": a newer promotion of this table was made since; a promotion is used until the next "
                           "one is made");
}

std::size_t bucket_of(const promotion_buckets::table& t, const void* primary) noexcept {
  return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(primary) * 0x9e3779b97f4a7c15ull) >> t.shift);
}

slot_ptr first_of(promotion_buckets::head head) noexcept {
  return reinterpret_cast<slot_ptr>(head & promotion_buckets::address_mask);
}

}  // namespace

dependent_promotion::dependent_promotion(const handle_table& table, std::uint8_t condemned) noexcept
    : table_(table), condemned_(condemned) {
  internal::handle_table_state& state = *table.state_;
  epoch_ = state.promotion.next_epoch() << promotion_buckets::epoch_shift;
  // The buckets after the count: reserve() grew them before the block count covered them.
  end_ = state.kinds[static_cast<std::size_t>(handle_kind::dependent)].directory.size();
  buckets_ = state.promotion.current();
  indexed_ = state.dependents != nullptr;
}

std::size_t dependent_promotion::start_erased(void* is_alive, detail::predicate_fn alive, void* mark,
                                              detail::visit_fn fn) {
  if (started_) throw std::logic_error("palrt: dependent_promotion::start: a promotion starts once");
  require_current(table_.state_->promotion, epoch_, "start");
  started_ = true;
  if (end_ == 0) return 0;
  const internal::block_directory& directory =
      table_.state_->kinds[static_cast<std::size_t>(handle_kind::dependent)].directory;
  auto& buckets = *static_cast<promotion_buckets::table*>(buckets_);
  void* const marker = detail::free_slot_marker();
  std::size_t marked = 0;
  for (std::size_t b = 0; b < end_; ++b) {
    if (condemned_ != all_generations && directory.age(b).load(std::memory_order_relaxed) > condemned_) continue;
    handle_block* block = directory.block(b);
    slot_ptr* links = internal::dependent_links(block, indexed_);
    internal::for_each_taken_slot(block, [&](handle_block*, std::size_t i) {
      void* primary = block->slots[i].load(std::memory_order_acquire);
      if (!primary || primary == marker) return;
      if (alive(is_alive, primary)) {
        void* secondary = block->secondaries[i].load(std::memory_order_acquire);
        if (secondary && !alive(is_alive, secondary)) {
          fn(mark, secondary);
          ++marked;
        }
        return;
      }
      promotion_buckets::head& head = buckets.heads[bucket_of(buckets, primary)];
      links[i] = (head & ~promotion_buckets::address_mask) == epoch_ ? first_of(head) : nullptr;
      head = epoch_ | reinterpret_cast<std::uintptr_t>(&block->slots[i]);
      ++pending_;
    });
  }
  return marked;
}

std::size_t dependent_promotion::on_marked_erased(const void* object, void* mark, detail::visit_fn fn) {
  if (pending_ == 0 || !object) return 0;
  require_current(table_.state_->promotion, epoch_, "on_marked");
  auto& buckets = *static_cast<promotion_buckets::table*>(buckets_);
  promotion_buckets::head& head = buckets.heads[bucket_of(buckets, object)];
  if ((head & ~promotion_buckets::address_mask) != epoch_) return 0;
  // The handles waiting on `object` leave the bucket's chain before mark() is called for
  // them: mark() may mark recursively and come back here for this same bucket. The first
  // one's secondary is kept aside, the others go on a list of their own through their links.
  // `prev` is where the chain's current slot is kept: `first` (the head, stored back under
  // its epoch once the chain is done) or the link of the slot before it.
  slot_ptr first = first_of(head);
  slot_ptr more = nullptr;      // matches after the first, through their links
  void* first_match = nullptr;  // the first match's secondary (the usual case: one)
  bool matched = false;
  slot_ptr* prev = &first;
  for (slot_ptr n = first; n;) {
    handle_block* block = handle_block::of(n);
    const std::size_t i = block->index_of(n);
    slot_ptr* link = &internal::dependent_links(block, indexed_)[i];
    const slot_ptr next = *link;
    if (n->load(std::memory_order_acquire) == object) {
      *prev = next;
      --pending_;
      if (!matched) {
        matched = true;
        first_match = block->secondaries[i].load(std::memory_order_acquire);
      } else {
        *link = more;
        more = n;
      }
    } else {
      prev = link;
    }
    n = next;
  }
  head = epoch_ | reinterpret_cast<std::uintptr_t>(first);
  std::size_t marked = 0;
  if (first_match) {
    fn(mark, first_match);
    ++marked;
  }
  while (more) {
    handle_block* block = handle_block::of(more);
    const std::size_t i = block->index_of(more);
    more = internal::dependent_links(block, indexed_)[i];
    if (void* secondary = block->secondaries[i].load(std::memory_order_acquire)) {
      fn(mark, secondary);
      ++marked;
    }
  }
  return marked;
}

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// The small-item ring (internal/post_ring.hpp states the protocol).
#include "palrt/sync/internal/post_ring.hpp"

#include <sched.h>
#include <sys/mman.h>

namespace palrt::sync::internal {
namespace {
constexpr std::uint64_t closed_bit = 1;
constexpr std::uint64_t publish_every = 64;
constexpr std::size_t mapped_bytes = post_ring::capacity * 16;
}  // namespace

post_ring::~post_ring() {
  if (slots_) ::munmap(slots_, mapped_bytes);
}

std::uint64_t post_ring::push(std::uint64_t kind, std::uint64_t bits) noexcept {
  // relaxed: a first guess, checked by the compare-exchange.
  std::uint64_t t = tail_.load(std::memory_order_relaxed);
  std::uint64_t position;
  do {
    if (t & closed_bit) return 0;
    position = t >> 1;
    // acquire: the worker's reads of the slots it passed come before our write over them.
    if (position - published_head_.load(std::memory_order_acquire) >= capacity) return 0;
    // seq_cst on success: a claim and a close are ordered in the word, and the claim comes
    // before the write below, so a stop's close sees it or refuses it. relaxed on failure:
    // we only retry with the value seen.
  } while (!tail_.compare_exchange_weak(t, t + 2, std::memory_order_seq_cst, std::memory_order_relaxed));
  entry& e = slots_[position % capacity];
  e.bits = bits;
  const std::uint64_t w = word(position, kind);
  // seq_cst: the release that publishes the bits, and W1 of the park protocol.
  word_of(e).store(w, std::memory_order_seq_cst);
  return w;
}

bool post_ring::cancel(std::uint64_t w) noexcept {
  std::uint64_t expected = w;
  // relaxed: nothing of the entry is read or written but this word, whose own order decides.
  return word_of(slots_[(w >> kind_bits) % capacity])
      .compare_exchange_strong(expected, (w & ~std::uint64_t{(1u << kind_bits) - 1}) | cancelled,
                               std::memory_order_relaxed, std::memory_order_relaxed);
}

post_ring::taken_item post_ring::take(std::uint64_t& kind, std::uint64_t& bits) noexcept {
  entry& e = slots_[head_ % capacity];
  // acquire: the bits, published by the poster's store. Marking an entry not yet published is
  // harmless: its poster's store comes later in the word's order and overwrites the mark.
  const std::uint64_t w = word_of(e).exchange(word(head_, taken), std::memory_order_acquire);
  if ((w >> kind_bits) != (head_ & position_mask)) return taken_item::none;
  const std::uint64_t k = kind_of(w);
  if (k < cancelled) return taken_item::none;  // empty or our own mark: not published yet
  if (k != cancelled) {
    kind = k;
    bits = e.bits;  // before the publish below lets the next lap's poster overwrite it
  }
  if (++head_ % publish_every == 0) publish_head();
  return k == cancelled ? taken_item::skipped : taken_item::item;
}

std::uint64_t post_ring::cancel_all_closed() noexcept {
  close();  // a stop closed it already; again costs nothing and makes `end` final for sure
  // acquire: as relaxed would (only the count is read), but harmless.
  const std::uint64_t end = tail_.load(std::memory_order_acquire) >> 1;
  std::uint64_t count = 0;
  while (head_ != end) {
    std::uint64_t kind = 0, bits = 0;
    switch (take(kind, bits)) {
      case taken_item::item:
        ++count;  // trivially destructible: nothing to destroy
        break;
      case taken_item::skipped: break;
      case taken_item::none:
        // Claimed before the close and not written yet: its poster is between two stores.
        sched_yield();
        break;
    }
  }
  publish_head();
  // release: a new worker that sees the ring free (acquire) sees our last head.
  free_.store(true, std::memory_order_release);
  return count;
}

void post_ring::close() noexcept {
  // seq_cst: a claim after it sees the bit (the same word), and the stopper's read of the
  // worker's sleep word after it is ordered as the park protocol needs (as work_inbox::close).
  tail_.fetch_or(closed_bit, std::memory_order_seq_cst);
}

bool post_ring::reopen_if_free() noexcept {
  // acquire: the last worker's head (cancel_all_closed).
  if (!free_.load(std::memory_order_acquire)) return false;
  if (!slots_) {
    void* const p = ::mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;  // stays closed: small items use nodes
    slots_ = static_cast<entry*>(p);    // published to the worker and posters by the start
  }
  free_.store(false, std::memory_order_relaxed);            // relaxed: under the manager's start lock
  tail_.fetch_and(~closed_bit, std::memory_order_seq_cst);  // seq_cst: rare; as close()
  return true;
}

void post_ring::unclaim() noexcept {
  close();
  free_.store(true, std::memory_order_release);  // release: as in cancel_all_closed()
}

}  // namespace palrt::sync::internal

// SPDX-License-Identifier: MIT
// The posters' lock-free hand-off to the worker (internal/work_inbox.hpp states the protocol).
#include "palrt/sync/internal/work_inbox.hpp"

namespace palrt::sync::internal {

bool work_inbox::push(work_node& n) noexcept {
  std::atomic<std::uintptr_t>& head = heads_[static_cast<std::size_t>(n.priority)].word;
  // relaxed: only a first guess at the head; the compare-exchange checks it.
  std::uintptr_t seen = head.load(std::memory_order_relaxed);
  do {
    if (seen & closed_bit) return false;
    n.next = as_node(seen);
    // seq_cst on success: the release that publishes the node, and the first half of fence
    // pair W (worker_state.hpp). relaxed on failure: we only retry with the new head.
  } while (!head.compare_exchange_weak(seen, reinterpret_cast<std::uintptr_t>(&n), std::memory_order_seq_cst,
                                       std::memory_order_relaxed));
  return true;
}

work_node* work_inbox::reversed(work_node* newest_first) noexcept {
  work_node* oldest_first = nullptr;
  while (newest_first) {
    work_node* const n = newest_first;
    newest_first = n->next;
    n->next = oldest_first;
    oldest_first = n;
  }
  return oldest_first;
}

work_node* work_inbox::take_where(std::size_t p, bool only_if_closed) noexcept {
  std::atomic<std::uintptr_t>& head = heads_[p].word;
  // acquire: the posters' writes to the nodes, released by their pushes (each push is a
  // read-modify-write, so the last one's release sequence carries all earlier ones).
  std::uintptr_t seen = head.load(std::memory_order_acquire);
  for (;;) {
    if (!as_node(seen) || (only_if_closed && !(seen & closed_bit))) return nullptr;
    // acquire on success: as above, for pushes after the load. Keeps the closed bit: a take
    // never reopens the inbox.
    if (head.compare_exchange_weak(seen, seen & closed_bit, std::memory_order_acquire, std::memory_order_acquire))
      return reversed(as_node(seen));
  }
}

work_node* work_inbox::take(std::size_t p) noexcept { return take_where(p, false); }

work_node* work_inbox::take_if_closed(std::size_t p) noexcept { return take_where(p, true); }

bool work_inbox::has_any() const noexcept {
  for (std::size_t p = 0; p < work_priority_count; ++p) {
    if (has_items(p)) return true;
  }
  return false;
}

void work_inbox::close() noexcept {
  // seq_cst: a push after it must see the bit (the same word: any ordering would), and the
  // stopper's read of the worker's sleep word after it pairs with the worker's re-check of
  // closed() (fence pair W), so a parking worker cannot miss the stop.
  for (head& h : heads_) h.word.fetch_or(closed_bit, std::memory_order_seq_cst);
}

void work_inbox::reopen() noexcept {
  // seq_cst for simplicity: a restart, rare, under the manager's start lock.
  for (head& h : heads_) h.word.fetch_and(~closed_bit, std::memory_order_seq_cst);
}

std::uint64_t work_inbox::count_waiting() const noexcept {
  std::uint64_t n = 0;
  for (const head& h : heads_) {
    // acquire: the nodes' links, as in take().
    for (const work_node* node = as_node(h.word.load(std::memory_order_acquire)); node; node = node->next) ++n;
  }
  return n;
}

}  // namespace palrt::sync::internal

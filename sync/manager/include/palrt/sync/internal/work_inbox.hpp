// SPDX-License-Identifier: MIT
// Where posters hand items to the sync manager's worker without a lock: one push stack per
// priority (a Treiber stack that only ever grows by compare-exchange at its head), emptied
// whole by the worker with one compare-exchange and reversed into its own FIFO
// (work_queue.hpp), so items of one priority keep the order of their pushes.
//
// Protocol:
//   push (any thread): n.next = head; CAS head: head -> &n (seq_cst, see below). Fails, and
//     pushes nothing, once the inbox is closed.
//   take (the worker): CAS head: list -> empty, keeping the closed bit. It takes the whole
//     list, so no node is ever popped alone and the stack has no ABA problem: a push compares
//     only the head it links to, and a node cannot come back to the head while a poster links
//     to it (it is not in the pool until the worker ran it).
//   close (a stop): fetch_or the closed bit into every head. A push either comes before it in
//     the head's modification order, and is in the list the stopping worker takes and
//     cancels, or after it, and sees the bit and refuses: no item is accepted and then lost.
//   reopen (a restart): clears the bit.
// The closed bit is bit 0 of the head: nodes are 64-byte aligned (work_node.hpp).
//
// The push is seq_cst because it is one half of the worker's sleep protocol (worker_state.hpp,
// fence pair W): a poster pushes, then reads whether the worker parks; the worker announces
// parking, then reads the heads. It is also a release: the worker's acquire take sees the
// node's fields as the poster wrote them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "palrt/sync/internal/work_node.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync::internal {

class work_inbox {
 public:
  // Any thread: queues `n` in its priority's stack. false, queueing nothing, if closed.
  bool push(work_node& n) noexcept;
  // The worker: removes and returns priority p's items, oldest first (linked through
  // `next`), or null. acquire: the posters' node writes.
  work_node* take(std::size_t p) noexcept;
  // A stopping worker: like take(), but only while the inbox is closed (null once reopened:
  // a worker left over from an earlier launch must not take the new worker's items).
  work_node* take_if_closed(std::size_t p) noexcept;

  // Whether priority p / any priority has items. seq_cst: the worker's re-check before it
  // parks (worker_state.hpp, fence pair W); relaxed would do for the spin, which only needs a
  // hint, but one load of a line it reads anyway costs the same either way on x86.
  bool has_items(std::size_t p) const noexcept {
    return (heads_[p].word.load(std::memory_order_seq_cst) & ~closed_bit) != 0;
  }
  bool has_any() const noexcept;
  // Whether close() has finished: it sets the bits from the first head to the last, so the
  // last head's bit says all are set. seq_cst: the worker's re-check before it parks, as above
  // (a stop closes, then reads whether the worker parks).
  bool closed() const noexcept {
    return (heads_[work_priority_count - 1].word.load(std::memory_order_seq_cst) & closed_bit) != 0;
  }

  void close() noexcept;
  void reopen() noexcept;

  // Tests: the items waiting in the stacks. Only while nothing takes from them (the worker
  // is held inside a work item), so that the nodes it walks stay linked.
  std::uint64_t count_waiting() const noexcept;

 private:
  static constexpr std::uintptr_t closed_bit = 1;
  static work_node* as_node(std::uintptr_t w) noexcept { return reinterpret_cast<work_node*>(w & ~closed_bit); }
  static work_node* reversed(work_node* newest_first) noexcept;
  work_node* take_where(std::size_t p, bool only_if_closed) noexcept;

  // One cache line per priority: posters of one priority never slow down those of another.
  struct alignas(64) head {
    std::atomic<std::uintptr_t> word{0};
  };
  std::array<head, work_priority_count> heads_{};
};

}  // namespace palrt::sync::internal

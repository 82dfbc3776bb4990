// SPDX-License-Identifier: MIT
// The worker's own queue: one intrusive FIFO per priority, and the timers (items posted to
// run later) in a list sorted by due time. Only the worker touches it, so it needs no lock and
// no atomics; posters reach it through the inbox (work_inbox.hpp), whose items the worker
// moves here in batches, oldest first. Nothing here allocates; nodes come from the node pool
// or an invoke context.
//
// Cancelled items stay linked until the worker meets them (work_node.hpp, claim protocol):
// pop_ready() and first_timer() return them like any other, and the worker skips them.
//
// Timers are kept sorted by insertion (O(timers) per post_after): palrt's own timers are few,
// and a sorted list needs no allocation, unlike a heap in a growing array.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "palrt/sync/internal/work_inbox.hpp"
#include "palrt/sync/internal/work_node.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync::internal {

class post_ring;

// What pop_ready() found: a node, or the small-item ring's head item (post_ring::take()).
struct ready_item {
  work_node* node = nullptr;
  bool from_ring = false;
  explicit operator bool() const noexcept { return node || from_ring; }
};

class work_queue {
 public:
  // Appends a list taken from the inbox (oldest first, through `next`): untimed items to
  // their priority's FIFO, timed ones into the timers.
  void accept(work_node* oldest_first) noexcept;
  // Moves the timers due at `now_ns` to the tails of their FIFOs (with timers queued only;
  // `now_ns` is read by the caller then), then removes and returns the oldest item of the
  // highest priority, taking from the inbox where needed: a priority's inbox holds items newer
  // than its FIFO, so it is taken when its FIFO is empty, and the inboxes of the priorities
  // above the one returned are all looked at first. Nothing if nothing is ready.
  // With `ring` (the worker's small-item ring, or null): normal priority merges the ring with
  // its FIFO by the nodes' ring stamps (post_ring.hpp): the FIFO's first node once the ring's
  // head has reached its stamp, else the ring's head item if published; a first node that
  // waits for a ring item still being written holds back the priorities below it too.
  ready_item pop_ready(work_inbox& inbox, std::int64_t now_ns, const post_ring* ring) noexcept;

  // Tests: called by pop_ready() between its look at the ring and its look at the normal
  // inbox, to hold the worker there while a test posts (sync_manager_access). One relaxed
  // load per pop: the line stays in the worker's cache.
  static inline std::atomic<void (*)()> between_looks_for_test{nullptr};
  // The earliest timer (cancelled or not), or null; and its removal.
  work_node* first_timer() const noexcept { return timers_.head; }
  void remove_first_timer() noexcept;
  // Removes and returns every node, ready and timers, as a list through `next`.
  work_node* take_all() noexcept;

  bool has_ready() const noexcept;
  bool has_timers() const noexcept { return timers_.head != nullptr; }

 private:
  struct fifo {
    work_node* head = nullptr;
    work_node* tail = nullptr;
  };
  static void append(fifo& f, work_node& n) noexcept;
  static work_node* pop_front(fifo& f) noexcept;
  void insert_timer(work_node& n) noexcept;

  std::array<fifo, work_priority_count> ready_{};
  fifo timers_;  // doubly linked (prev, next), sorted by due_ns
};

}  // namespace palrt::sync::internal

// SPDX-License-Identifier: MIT
// The sync manager's queue: one intrusive FIFO per priority, and the timers (items posted to
// run later) in a list sorted by due time. Not synchronised: the worker_state's queue lock
// guards it. Nothing here allocates; nodes come from the node pool or an invoke context.
//
// Timers are kept sorted by insertion (O(timers) per post_after): palrt's own timers are few,
// and a sorted list needs no allocation, unlike a heap in a growing array.
#pragma once

#include <array>
#include <cstdint>

#include "palrt/sync/internal/work_node.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync::internal {

class work_queue {
 public:
  // Appends to its priority's FIFO.
  void push_ready(work_node& n) noexcept;
  // Inserts into the timers by n.due_ns (after those due at the same time).
  void push_timer(work_node& n) noexcept;
  // Moves the timers due at `now_ns` to the tails of their FIFOs, then removes and returns
  // the oldest item of the highest priority; null if none is ready.
  work_node* pop_ready(std::int64_t now_ns) noexcept;
  // Removes a queued node (ready or timer).
  void remove(work_node& n) noexcept;
  // Removes and returns every node, ready and timers, as a list through `next`.
  work_node* take_all() noexcept;

  bool has_ready() const noexcept;
  bool has_timers() const noexcept { return timers_.head != nullptr; }
  // The earliest timer's due time, or INT64_MAX with none.
  std::int64_t next_due_ns() const noexcept;

 private:
  struct fifo {
    work_node* head = nullptr;
    work_node* tail = nullptr;
  };
  static void append(fifo& f, work_node& n) noexcept;
  static void unlink(fifo& f, work_node& n) noexcept;
  fifo& ready_of(const work_node& n) noexcept { return ready_[static_cast<std::size_t>(n.priority)]; }

  std::array<fifo, work_priority_count> ready_{};
  fifo timers_;
};

}  // namespace palrt::sync::internal

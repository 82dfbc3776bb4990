// SPDX-License-Identifier: MIT
// One item of the sync manager's work queue. Posted items' nodes come from the node pool and
// go back to it after they ran or were cancelled; an invoke's node is part of its caller's
// leased invoke_context.
#pragma once

#include <cstdint>

#include "palrt/sync/task.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync::internal {

struct invoke_context;

struct work_node {
  // Queue links (a priority's FIFO or the timer list), guarded by the queue's lock.
  work_node* prev = nullptr;
  work_node* next = nullptr;
  // The pool's links: every node the pool made, and its free list.
  work_node* pool_all_next = nullptr;
  work_node* pool_free_next = nullptr;

  std::uint64_t id = 0;  // unique per queued item: a work_ticket names the node and the id
  work_priority priority = work_priority::normal;
  bool queued = false;   // in a FIFO or the timer list (cancel checks it)
  bool timed = false;    // in the timer list, due at due_ns
  std::int64_t due_ns = 0;  // CLOCK_MONOTONIC

  task posted;                       // a posted item's work
  invoke_context* invoke = nullptr;  // an invoked item's caller
};

}  // namespace palrt::sync::internal

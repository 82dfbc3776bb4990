// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/work_queue.hpp"

#include <limits>

namespace palrt::sync::internal {

void work_queue::append(fifo& f, work_node& n) noexcept {
  n.next = nullptr;
  n.prev = f.tail;
  if (f.tail) {
    f.tail->next = &n;
  } else {
    f.head = &n;
  }
  f.tail = &n;
}

void work_queue::unlink(fifo& f, work_node& n) noexcept {
  if (n.prev) {
    n.prev->next = n.next;
  } else {
    f.head = n.next;
  }
  if (n.next) {
    n.next->prev = n.prev;
  } else {
    f.tail = n.prev;
  }
  n.prev = n.next = nullptr;
}

void work_queue::push_ready(work_node& n) noexcept {
  n.timed = false;
  n.queued = true;
  append(ready_of(n), n);
}

void work_queue::push_timer(work_node& n) noexcept {
  n.timed = true;
  n.queued = true;
  work_node* after = timers_.tail;
  while (after && after->due_ns > n.due_ns) after = after->prev;
  n.prev = after;
  n.next = after ? after->next : timers_.head;
  if (n.next) {
    n.next->prev = &n;
  } else {
    timers_.tail = &n;
  }
  if (after) {
    after->next = &n;
  } else {
    timers_.head = &n;
  }
}

work_node* work_queue::pop_ready(std::int64_t now_ns) noexcept {
  while (timers_.head && timers_.head->due_ns <= now_ns) {
    work_node& due = *timers_.head;
    unlink(timers_, due);
    push_ready(due);
  }
  for (std::size_t p = work_priority_count; p-- > 0;) {
    fifo& f = ready_[p];
    if (work_node* n = f.head) {
      unlink(f, *n);
      n->queued = false;
      return n;
    }
  }
  return nullptr;
}

void work_queue::remove(work_node& n) noexcept {
  unlink(n.timed ? timers_ : ready_of(n), n);
  n.queued = false;
}

work_node* work_queue::take_all() noexcept {
  work_node* all = nullptr;
  work_node* last = nullptr;
  const auto take = [&](fifo& f) {
    while (work_node* n = f.head) {
      unlink(f, *n);
      n->queued = false;
      if (last) {
        last->next = n;
      } else {
        all = n;
      }
      last = n;
    }
  };
  for (std::size_t p = work_priority_count; p-- > 0;) take(ready_[p]);
  take(timers_);
  return all;
}

bool work_queue::has_ready() const noexcept {
  for (const fifo& f : ready_) {
    if (f.head) return true;
  }
  return false;
}

std::int64_t work_queue::next_due_ns() const noexcept {
  return timers_.head ? timers_.head->due_ns : std::numeric_limits<std::int64_t>::max();
}

}  // namespace palrt::sync::internal

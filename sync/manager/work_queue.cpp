// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/work_queue.hpp"

#include "palrt/sync/internal/post_ring.hpp"

namespace palrt::sync::internal {

void work_queue::append(fifo& f, work_node& n) noexcept {
  n.next = nullptr;
  if (f.tail) {
    f.tail->next = &n;
  } else {
    f.head = &n;
  }
  f.tail = &n;
}

work_node* work_queue::pop_front(fifo& f) noexcept {
  work_node* const n = f.head;
  if (!n) return nullptr;
  f.head = n->next;
  if (!f.head) f.tail = nullptr;
  n->next = nullptr;
  return n;
}

void work_queue::insert_timer(work_node& n) noexcept {
  // After those due at the same time: first in, first out among equal due times.
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

void work_queue::accept(work_node* oldest_first) noexcept {
  while (work_node* n = oldest_first) {
    oldest_first = n->next;
    if (n->timed) {
      insert_timer(*n);
    } else {
      append(ready_[static_cast<std::size_t>(n->priority)], *n);
    }
  }
}

void work_queue::remove_first_timer() noexcept {
  work_node* const n = timers_.head;
  timers_.head = n->next;
  if (timers_.head) {
    timers_.head->prev = nullptr;
  } else {
    timers_.tail = nullptr;
  }
  n->prev = n->next = nullptr;
}

ready_item work_queue::pop_ready(work_inbox& inbox, std::int64_t now_ns, const post_ring* ring) noexcept {
  while (timers_.head && timers_.head->due_ns <= now_ns) {
    work_node& due = *timers_.head;
    remove_first_timer();
    append(ready_[static_cast<std::size_t>(due.priority)], due);
  }
  constexpr auto normal = static_cast<std::size_t>(work_priority::normal);
  for (std::size_t p = work_priority_count; p-- > 0;) {
    fifo& f = ready_[p];
    if (p == normal && ring) {
      // The ring first, then the inbox: a node pushed before the ring item seen here (by its
      // post happening before that item's) is then in the inbox, and its stamp, at most the
      // item's position, puts it first. Looked at the other way round, a thread could push a
      // node and write a ring item between the two looks, and the item would run first.
      const bool ring_ready = ring->ready();
      // relaxed: a test sets it before the posts it times against this window.
      if (void (*const hook)() = between_looks_for_test.load(std::memory_order_relaxed)) hook();
      // Taken even behind a first node that waits for the ring: the inbox then looks empty,
      // and the worker parks until the ring item it waits for is written (its poster wakes it).
      if (inbox.has_items(p)) accept(inbox.take(p));
      if (f.head && f.head->ring_stamp <= ring->head()) return {pop_front(f), false};
      if (ring_ready) return {nullptr, true};
      if (f.head) return {};
      continue;
    }
    // Timed items taken here join the timers; a due one is seen at the next pop.
    if (!f.head && inbox.has_items(p)) accept(inbox.take(p));
    if (work_node* n = pop_front(f)) return {n, false};
  }
  return {};
}

work_node* work_queue::take_all() noexcept {
  work_node* all = nullptr;
  work_node* last = nullptr;
  const auto link = [&](work_node* n) {
    n->prev = n->next = nullptr;
    if (last) {
      last->next = n;
    } else {
      all = n;
    }
    last = n;
  };
  for (std::size_t p = work_priority_count; p-- > 0;) {
    while (work_node* n = pop_front(ready_[p])) link(n);
  }
  while (work_node* n = timers_.head) {
    remove_first_timer();
    link(n);
  }
  return all;
}

bool work_queue::has_ready() const noexcept {
  for (const fifo& f : ready_) {
    if (f.head) return true;
  }
  return false;
}

}  // namespace palrt::sync::internal

// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/waitable_object.hpp"

#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/pal/internal/futex.hpp"
#include "palrt/sync/internal/thread_record.hpp"

namespace palrt::sync::internal {

std::mutex& objects_lock() noexcept {
  // A function-local static: usable from any static initialiser or thread_local destructor
  // that touches a waitable object, whatever the order of initialisation. Never destroyed,
  // and held across fork(), so that a fork()ed child's waits never find it held by a thread
  // the child does not have.
  static std::mutex& lock = *[] {
    auto* m = new std::mutex;
    pal::internal::hold_across_fork(*m, pal::internal::fork_lock_rank::leaf);  // bad_alloc: terminate
    return m;
  }();
  return lock;
}

void wake_list::add(std::atomic<std::uint32_t>& word) noexcept {
  if (size_ == capacity) {
    pal::internal::futex_wake(word, 1);
    return;
  }
  words_[size_++] = &word;
}

void wake_list::wake_all() noexcept {
  // Only the syscall touches the word now, which reads no user memory: harmless even if the
  // woken thread has already seen its word and moved on (see object.hpp).
  for (std::size_t i = 0; i < size_; ++i) pal::internal::futex_wake(*words_[i], 1);
  size_ = 0;
}

waitable_object::~waitable_object() = default;

void waitable_object::link(wait_block& b) noexcept {
  b.prev = tail_;
  b.next = nullptr;
  if (tail_) {
    tail_->next = &b;
  } else {
    head_ = &b;
  }
  tail_ = &b;
}

void waitable_object::unlink(wait_block& b) noexcept {
  if (b.prev) {
    b.prev->next = b.next;
  } else {
    head_ = b.next;
  }
  if (b.next) {
    b.next->prev = b.prev;
  } else {
    tail_ = b.prev;
  }
  b.prev = b.next = nullptr;
}

std::size_t waitable_object::waiter_count() const noexcept {
  std::size_t n = 0;
  for (const wait_block* b = head_; b; b = b->next) ++n;
  return n;
}

void waitable_object::satisfy_waiters(wake_list& wakes) noexcept {
  // A completed waiter leaves every list it was in, possibly the next block of this one (a
  // wait-any may name one object twice), so the scan restarts from the head after each
  // completion. Waiters it could not satisfy stay, in order.
  bool completed = true;
  while (completed) {
    completed = false;
    for (wait_block* b = head_; b; b = b->next) {
      waiter& w = *b->owner;
      // A parent's thread that was waiting at fork(), seen in the child: it will never
      // return from its wait, so it must not take what a thread of the child could.
      if (w.thread->gone()) continue;
      if (!w.all) {
        if (!signalled_for(*w.thread)) continue;
        w.state = acquire(*w.thread) ? waiter_state::abandoned : waiter_state::signalled;
        w.index = b->index;
      } else if (!try_satisfy(w)) {
        continue;
      }
      complete(w, w.state, wakes);
      completed = true;
      break;
    }
  }
}

bool try_satisfy(waiter& w) noexcept {
  thread_record& t = *w.thread;
  if (!w.all) {
    for (std::size_t i = 0; i < w.count; ++i) {
      waitable_object& o = *w.blocks[i].target;
      if (!o.signalled_for(t)) continue;
      w.state = o.acquire(t) ? waiter_state::abandoned : waiter_state::signalled;
      w.index = w.blocks[i].index;
      return true;
    }
    return false;
  }
  for (std::size_t i = 0; i < w.count; ++i) {
    if (!w.blocks[i].target->signalled_for(t)) return false;
  }
  // All of them, in one step under the lock: that is the atomicity of wait-all.
  w.state = waiter_state::signalled;
  w.index = 0;
  for (std::size_t i = 0; i < w.count; ++i) {
    if (w.blocks[i].target->acquire(t) && w.state != waiter_state::abandoned) {
      w.state = waiter_state::abandoned;
      w.index = w.blocks[i].index;
    }
  }
  return true;
}

void complete(waiter& w, waiter_state state, wake_list& wakes) noexcept {
  for (std::size_t i = 0; i < w.count; ++i) w.blocks[i].target->unlink(w.blocks[i]);
  w.state = state;
  thread_record& t = *w.thread;
  t.current_wait_ = nullptr;
  // release: the waiter reads its result (w.state, w.index, what it acquired) after an
  // acquire load of the word, without the lock. Nothing touches `w` after this store.
  t.wait_word.store(1, std::memory_order_release);
  wakes.add(t.wait_word);
}

}  // namespace palrt::sync::internal

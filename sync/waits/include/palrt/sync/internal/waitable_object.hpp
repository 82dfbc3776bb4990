// SPDX-License-Identifier: MIT
// The waitable object and the wait protocol behind wait.hpp.
//
// Protocol. Every object's state and waiter list are guarded by one process-wide lock,
// objects_lock(). A waiting thread builds a `waiter` and one `wait_block` per handle on its
// own stack, and, under the lock, either finds the wait satisfied at once or links the
// blocks into the objects' waiter lists and sleeps on its thread's futex word
// (thread_record::wait_word). Whoever makes an object signalled (set, release, a thread or
// process exit) does it under the lock and then calls satisfy_waiters(), which, in FIFO
// order, acquires the object on behalf of each waiter it can satisfy, unlinks all of that
// waiter's blocks, records the result in the waiter and stores 1 to its word; the futex
// wake-up happens after the lock is released (wake_list). queue_apc() completes an
// alertable waiter the same way, with `alerted`.
//
// So a waiter is completed exactly once, by whoever holds the lock, and after its word reads
// 1 nobody touches its stack again: the completer unlinked every block before the store and
// afterwards only makes the futex syscall, which reads no memory of ours (a late wake-up
// that finds the word reused for a later wait is spurious to it, and every futex wait here
// re-checks its word). A waiter whose timeout passes takes the lock and either finds itself
// completed (then the signal wins: no lost wake-up) or unlinks itself and reports timed_out.
//
// Satisfying a wait-all waiter checks all of its objects under the same lock, so it takes
// all or none atomically.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace palrt::sync::internal {

class waitable_object;
class thread_record;
struct waiter;

// One waiter's registration on one object: a node of the object's waiter list.
struct wait_block {
  waitable_object* target = nullptr;
  waiter* owner = nullptr;
  std::size_t index = 0;  // of the handle in the wait's argument list
  wait_block* prev = nullptr;
  wait_block* next = nullptr;
};

enum class waiter_state : std::uint8_t { waiting, signalled, abandoned, alerted, timed_out };

// One wait in progress, on its thread's stack.
struct waiter {
  thread_record* thread = nullptr;
  wait_block* blocks = nullptr;
  std::size_t count = 0;
  bool all = false;
  bool alertable = false;
  waiter_state state = waiter_state::waiting;  // written under the lock, then the word
  std::size_t index = 0;
};

std::mutex& objects_lock() noexcept;

// Futex words to wake once objects_lock() is released: a waker completes waiters under the
// lock, so that a woken thread does not wake up only to block on the lock its waker holds.
class wake_list {
 public:
  wake_list() = default;
  wake_list(const wake_list&) = delete;
  wake_list& operator=(const wake_list&) = delete;
  ~wake_list() { wake_all(); }

  void add(std::atomic<std::uint32_t>& word) noexcept;
  // Call after releasing the lock (the destructor does, too).
  void wake_all() noexcept;

 private:
  static constexpr std::size_t capacity = 32;  // beyond this, add() wakes at once, under the lock
  std::atomic<std::uint32_t>* words_[capacity];
  std::size_t size_ = 0;
};

class waitable_object {
 public:
  waitable_object() = default;
  waitable_object(const waitable_object&) = delete;
  waitable_object& operator=(const waitable_object&) = delete;
  virtual ~waitable_object();

  // Under objects_lock(): whether a wait by `t` would be satisfied now.
  virtual bool signalled_for(const thread_record& t) const noexcept = 0;
  // Under objects_lock(), only when signalled_for(t): takes the object for `t` (resets an
  // auto-reset event, takes a semaphore count, owns a mutex). true if that was an abandoned
  // mutex.
  virtual bool acquire(thread_record& t) noexcept = 0;

  // Under objects_lock(): after this object may have become signalled, completes the waiters
  // it can satisfy, first come first served.
  void satisfy_waiters(wake_list& wakes) noexcept;

  // Under objects_lock().
  void link(wait_block& b) noexcept;
  void unlink(wait_block& b) noexcept;
  std::size_t waiter_count() const noexcept;

 private:
  wait_block* head_ = nullptr;
  wait_block* tail_ = nullptr;
};

// Under objects_lock(): acquires for `w` what it waits for if it can be satisfied now (the
// lowest signalled index for a wait-any; everything for a wait-all) and records the result
// in `w`. false if it cannot be satisfied now (nothing acquired).
bool try_satisfy(waiter& w) noexcept;

// Under objects_lock(): unlinks every block of the waiting `w`, records `state`, and stores
// the word its thread sleeps on (woken through `wakes`).
void complete(waiter& w, waiter_state state, wake_list& wakes) noexcept;

}  // namespace palrt::sync::internal

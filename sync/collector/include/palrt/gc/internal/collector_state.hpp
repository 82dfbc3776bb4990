// SPDX-License-Identifier: MIT
// The collector's shared state, and the interface between the collector and the finalizer
// thread (the finalizer component builds on these; hosts do not).
//
// The state is shared (std::shared_ptr) between the collector and a finalizer thread, so
// that a finalizer thread detached after missing its stop deadline (a blocking finalizer)
// never touches freed memory when it wakes up.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/internal/dead_lists.hpp"
#include "palrt/gc/object.hpp"

namespace palrt::gc::internal {

// Objects' state_ (object.hpp), written by the collector and the finalizer thread.
enum object_state : std::uint8_t {
  live = 0,
  condemned = 1,    // dead, its handles being cleared; retired at the end of the collection
  f_reachable = 2,  // dead, queued for finalization
  finalizing = 3,   // its finalize() is running
  finalized = 4,    // finalize() returned without resurrecting it: back to the collector
};

// Objects' flags_ (object.hpp).
enum object_flags : std::uint8_t {
  has_finalizer = 1,            // a finalizable
  finalization_registered = 2,  // finalize it when found dead (suppress_finalize clears it)
  resurrected = 4,              // set by resurrect() while its finalize() runs
};

// A FIFO of dead objects waiting for their finalizer, linked through object::next_; the
// sequence numbers let a waiter wait for exactly the objects queued before it asked.
class finalization_queue {
 public:
  // The finalizer thread's wake-up, called after each push, under the queue's lock (so it
  // never runs after clear_consumer() returned). A plain function and its argument: a push
  // never allocates.
  void set_consumer(void (*wake)(void*), void* context);
  // The consumer stopped: waiters return, and pushes no longer wake anybody.
  void clear_consumer();
  bool has_consumer() const;

  void push(object* first, object* last, std::size_t n);
  // Everything queued, oldest first, as a chain (null if empty); O(1) under the lock. For
  // collect()'s own drain and the collector's destructor.
  object* take_all(std::size_t& n);
  // The oldest object queued (null if none), O(1) under the lock; `emptied`: it was the last.
  // The finalizer thread's way: it takes nothing it has not started, so that whoever drains
  // after it (collect(), a relaunched thread) finds every other object here, even while the
  // thread is stuck in a finalizer past its stop deadline.
  object* take_one(bool& emptied);
  // The consumer ran `n` more objects (after taking them); wakes waiters, if any.
  void complete(std::size_t n);

  std::uint64_t enqueued() const noexcept { return enqueued_.load(std::memory_order_acquire); }
  std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }
  // Blocks until completed() >= target: true; false at the deadline or once the consumer
  // stopped (or if there is none).
  bool wait_until_completed(std::uint64_t target, std::chrono::steady_clock::time_point deadline);

 private:
  mutable std::mutex lock_;
  std::condition_variable completed_changed_;
  object* head_ = nullptr;
  object* tail_ = nullptr;
  void (*wake_)(void*) = nullptr;
  void* wake_context_ = nullptr;
  bool consumer_ = false;
  std::size_t queued_ = 0;                   // objects in the list
  std::size_t waiters_ = 0;                  // threads in wait_until_completed()
  std::atomic<std::uint64_t> enqueued_{0};   // written under lock_
  std::atomic<std::uint64_t> completed_{0};  // written under lock_
};

// A batch of objects retired together, freed once no reader is older than its tag.
struct retired_batch {
  std::uint64_t tag;
  object* first;
  std::size_t count;
  // The record of the thread whose automatic collection retired it, which frees it (or any
  // collection of everything); null: retired by a collection of everything.
  const dead_list_record* owner;
};

struct collector_state {
  collector_state(handle_table& t, collector_options o) : table(t), options(o) {}
  handle_table& table;
  const collector_options options;
  // In a fork()ed child the collector is its parent's (collector.hpp, "After fork()").
  const pal::internal::fork_stamp made;

  // The dead lists, one per thread, with each thread's count of objects made
  // (dead_lists.cpp): pushed by the dying thread, taken all together by collect().
  dead_lists lists;
  // A lock-free stack (object::next_): pushed by the finalizer, taken whole by collect().
  std::atomic<object*> finalized_list{nullptr};
  finalization_queue finalization;

  std::mutex collect_lock;             // one collection at a time
  std::vector<retired_batch> retired;  // under collect_lock
  std::atomic<std::uint64_t> awaiting_grace{0};
  std::atomic<std::uint64_t> freed{0};
  std::atomic<std::uint64_t> collections{0};
  std::atomic<std::uint64_t> queued_total{0};

  // collect() runs the queue itself while no finalizer thread consumes it (collector.cpp):
  // requests since the running drain began (0: none runs), and what those drains did.
  std::atomic<std::uint32_t> inline_finalization_requests{0};
  std::atomic<std::uint64_t> finalized_inline{0};  // relaxed: counters
  std::atomic<std::uint64_t> inline_finalizer_exceptions{0};

  static void push(std::atomic<object*>& list, object* first, object* last) noexcept;

  // A singly linked chain through object::next_, built by one thread.
  struct chain_ref {
    object* first = nullptr;
    object* last = nullptr;
    std::size_t n = 0;
  };
  static void append(chain_ref& c, object* o) noexcept;
  static void prepend(chain_ref& c, object* o) noexcept;
  static void link(object* o, object* next) noexcept { o->next_ = next; }
  static void destroy(object* o) noexcept;  // frees the object (its destructor runs)
};

// make_object's allocation count reached collector_options::collect_every: collect here,
// unless a collection is running (on this thread or another): allocation never waits. Like
// collect(), it then runs the finalizers itself if no finalizer thread is attached. `mine`:
// the calling thread's record (collector.cpp says what it collects).
void collect_now(collector_state& c, dead_list_record& mine);
// An object of `c` died: counts deaths that a running collection itself caused (its
// destructors, its cleared dependent handles), so it knows to run another round.
void note_death(collector_state& c) noexcept;

// Running a finalizer, for the finalizer thread.
class finalization_access {
 public:
  enum class outcome { finalized, resurrected, threw };
  // Marks `o` finalizing, runs finalize() and contains what it throws (into *error).
  static outcome run(object& o, std::exception_ptr& error) noexcept;
  // After run(): a resurrected object goes back to life at once; the others are appended to
  // `done`, which hand_back() then gives to the collector's finalized list in one push.
  static void finished(object& o, outcome result, collector_state::chain_ref& done) noexcept;
  static void hand_back(collector_state& c, collector_state::chain_ref& done) noexcept;
  static object* next(const object& o) noexcept { return o.next_; }
  // What a finalizer threw, for reports: what() or a description.
  static std::string describe(std::exception_ptr error);
};

// The finalizer's way into a collector, and the tests'.
class collector_access {
 public:
  static std::shared_ptr<collector_state> state(const collector& c) noexcept { return c.state_; }

  // --- for tests: the dead lists (dead_lists.cpp) ---
  // The calling thread's slot (claimed now if it has none yet): slot_none, or < max_thread_slots.
  static std::uint32_t thread_slot() noexcept {
    return current_thread_slot == slot_unclaimed ? claim_thread_slot() : current_thread_slot;
  }
  static std::size_t thread_slots_in_use() noexcept { return internal::thread_slots_in_use(); }
  // Objects on a slot's list of `c`, or on its shared list. Only while nothing pushes onto it
  // or collects.
  static std::size_t dead_on_slot(const collector& c, std::uint32_t slot) noexcept {
    const dead_list_record* r = c.state_->lists.record_of_slot(slot);
    return r ? length(*r) : 0;
  }
  static std::size_t dead_on_shared_list(const collector& c) noexcept { return length(c.state_->lists.shared()); }
  // One-shot hooks between the two steps of the next push (D1, D2) and of the next take (T1,
  // T2) of `c`; `hook` must outlive that push or take.
  static void hook_next_push(collector& c, const dead_lists::step_hook& hook) noexcept {
    // release: the hook's fields, for the pusher's acquire exchange.
    c.state_->lists.between_push_steps.store(&hook, std::memory_order_release);
  }
  static void hook_next_take(collector& c, const dead_lists::step_hook& hook) noexcept {
    c.state_->lists.between_take_steps.store(&hook, std::memory_order_release);  // release: as above
  }

 private:
  static std::size_t length(const dead_list_record& r) noexcept {
    std::size_t n = 0;
    // acquire: the objects as their pushers linked them.
    for (const object* o = r.head.load(std::memory_order_acquire); o; o = detail::object_access::next(*o)) ++n;
    return n;
  }
};

}  // namespace palrt::gc::internal

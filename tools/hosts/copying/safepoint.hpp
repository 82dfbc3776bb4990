// SPDX-License-Identifier: MIT
// copying_host::world and copying_host::mutator: cooperative safepoints.
//
// A mutator is a thread attached to the heap. It holds object pointers only in its root array
// (its "shadow stack", `roots`), in the heap's globals and through palrt handles, and between
// two safepoint polls it may hold raw pointers in locals: the collector never runs while an
// attached thread is between two polls. The protocol (a JVM's safepoint, reduced to a lock):
//
//   mutator poll:   stop_requested (relaxed: a hint; the lock below orders everything) and,
//                   when set, park(): under the lock, running -> false, wake the collector,
//                   wait until the stop is over, running -> true.
//   collector:      under the lock, wait for any other collection to end (parking itself if
//                   it is a mutator), stop_requested = true, wait until no attached thread is
//                   running; collect without the lock; then, under it, stop_requested =
//                   false and wake everyone.
//   native:         a mutator about to block (joining threads, waiting for finalizers) leaves
//                   "running" (enter_native) and comes back through the same wait as park()
//                   (leave_native): the collector never waits for it, and it holds no raw
//                   pointer meanwhile.
//
// Everything the collector reads or writes in a mutator's state (roots, remembered set,
// TLAB) is ordered by the lock: the mutator's last writes happen before its unlock in park(),
// the collector's lock comes after; the collector's writes happen before its unlock at
// resume, the mutator's relock comes after. So no field of a mutator needs to be atomic but
// the stop hint, and TSan sees every edge. Attach and detach also wait out a stop in progress,
// so the collector walks the list of mutators without the lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace copying_host {

struct object;

struct mutator {
  // The shadow stack: the collector scans and updates every entry.
  std::vector<object*> roots;
  // Old (or pinned-space) objects this thread stored a nursery pointer into since the last
  // collection: the write barrier's log (heap::write).
  std::vector<object*> remembered;
  // Finalizable objects this thread allocated in the nursery since the last collection.
  std::vector<object*> young_finalizable;
  // This thread's allocation buffer in the nursery: [tlab, tlab_end).
  std::byte* tlab = nullptr;
  std::byte* tlab_end = nullptr;
  bool running = false;  // guarded by world::lock_
};

class world {
 public:
  // The fast path of a poll: one relaxed load (a hint; park() decides under the lock).
  bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_relaxed); }

  void attach(mutator& m) {
    std::unique_lock l(lock_);
    resumed_.wait(l, [&] { return !stop_requested_.load(std::memory_order_relaxed); });
    mutators_.push_back(&m);
    m.running = true;
    ++running_;
  }
  // `leaving` runs under the lock, with no collection in progress: the mutator's last words
  // (handing its remembered set to the heap).
  template <class Leaving>
  void detach(mutator& m, Leaving&& leaving) {
    std::unique_lock l(lock_);
    set_parked(m);
    resumed_.wait(l, [&] { return !stop_requested_.load(std::memory_order_relaxed); });
    leaving();
    std::erase(mutators_, &m);
  }

  void park(mutator& m) {
    std::unique_lock l(lock_);
    set_parked(m);
    resumed_.wait(l, [&] { return !stop_requested_.load(std::memory_order_relaxed); });
    set_running(m);
  }
  void enter_native(mutator& m) {
    std::lock_guard l(lock_);
    set_parked(m);
  }
  void leave_native(mutator& m) {
    std::unique_lock l(lock_);
    resumed_.wait(l, [&] { return !stop_requested_.load(std::memory_order_relaxed); });
    set_running(m);
  }

  // Stops every attached thread. `self` is the calling mutator, or null for a thread that is
  // not attached. `still_needed` is asked under the lock once any other collection is over
  // (a mutator whose allocation failed finds that someone else collected meanwhile): false
  // returns false without stopping anything.
  template <class StillNeeded>
  bool stop(mutator* self, StillNeeded&& still_needed) {
    std::unique_lock l(lock_);
    if (self) set_parked(*self);
    resumed_.wait(l, [&] { return !stop_requested_.load(std::memory_order_relaxed); });
    if (!still_needed()) {
      if (self) set_running(*self);
      return false;
    }
    // relaxed: a hint for polls; a parked thread reads it again under the lock.
    stop_requested_.store(true, std::memory_order_relaxed);
    all_parked_.wait(l, [&] { return running_ == 0; });
    return true;
  }
  void resume(mutator* self) {
    std::lock_guard l(lock_);
    stop_requested_.store(false, std::memory_order_relaxed);
    if (self) set_running(*self);
    resumed_.notify_all();
  }

  // With the world stopped (or under the lock): the attached threads.
  const std::vector<mutator*>& mutators() const noexcept { return mutators_; }

 private:
  void set_parked(mutator& m) {
    if (!m.running) return;
    m.running = false;
    if (--running_ == 0) all_parked_.notify_all();
  }
  void set_running(mutator& m) {
    if (m.running) return;
    m.running = true;
    ++running_;
  }

  std::mutex lock_;
  std::condition_variable resumed_;     // the stop is over
  std::condition_variable all_parked_;  // running_ reached 0
  std::atomic<bool> stop_requested_{false};
  std::size_t running_ = 0;
  std::vector<mutator*> mutators_;
};

}  // namespace copying_host

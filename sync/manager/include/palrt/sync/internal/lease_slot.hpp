// SPDX-License-Identifier: MIT
// A thread-local single-slot pool with the lease pattern.
//
// take() hands out the slot's object and empties the slot; give() puts an object back if the
// slot is empty and frees it otherwise. So the common, non-nested use (take, use, give) reuses
// one object per thread forever and allocates nothing, and a re-entrant use on the same
// thread (a nested invoke from inside a work item, while the outer one holds the lease) finds
// the slot empty and allocates its own object instead of sharing one that is in use: the bug
// a shared per-thread buffer has, where the inner use overwrites the outer one's state.
// After nesting, one object stays in the slot and the others are freed.
//
// One slot per thread and per T: declare it `constinit thread_local`. The slot itself has no
// destructor, so it stays usable for the whole of the thread's exit (a host's thread_local
// destructor may invoke, whenever it was made), as the read sections' records do
// (reader_epoch.cpp): the object it keeps is freed by an exit hook that the first give()
// registers, and a give() after that hook ran frees its object at once, since nothing would
// free one kept after.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace palrt::sync::internal {

template <class T>
class lease_slot {
 public:
  constexpr lease_slot() noexcept = default;

  // The slot's object, or a new one (counted in `allocations`). Throws std::bad_alloc.
  std::unique_ptr<T> take(std::atomic<std::uint64_t>& allocations) {
    if (slot_) return std::unique_ptr<T>(std::exchange(slot_, nullptr));
    // relaxed: a statistic, read by tests after the threads they count are done.
    allocations.fetch_add(1, std::memory_order_relaxed);
    return std::make_unique<T>();
  }
  // Keeps `object` for the next take() if the slot is empty and the thread's exit hook has not
  // run yet; frees it otherwise.
  void give(std::unique_ptr<T> object) noexcept {
    if (slot_ || exited_) return;
    static thread_local exit_hook hook{this};  // registered at the first give(), once
    slot_ = object.release();
  }

 private:
  struct exit_hook {
    lease_slot* slot;
    ~exit_hook() {
      slot->exited_ = true;
      const std::unique_ptr<T> kept(std::exchange(slot->slot_, nullptr));
    }
  };
  T* slot_ = nullptr;  // owned
  bool exited_ = false;
};

}  // namespace palrt::sync::internal

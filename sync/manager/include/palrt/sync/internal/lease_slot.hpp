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
// One slot per thread and per T: declare it `thread_local`.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace palrt::sync::internal {

template <class T>
class lease_slot {
 public:
  // The slot's object, or a new one (counted in `allocations`). Throws std::bad_alloc.
  std::unique_ptr<T> take(std::atomic<std::uint64_t>& allocations) {
    if (slot_) return std::move(slot_);
    // relaxed: a statistic, read by tests after the threads they count are done.
    allocations.fetch_add(1, std::memory_order_relaxed);
    return std::make_unique<T>();
  }
  // Keeps `object` for the next take() if the slot is empty; frees it otherwise.
  void give(std::unique_ptr<T> object) noexcept {
    if (!slot_) slot_ = std::move(object);
  }

 private:
  std::unique_ptr<T> slot_;
};

}  // namespace palrt::sync::internal

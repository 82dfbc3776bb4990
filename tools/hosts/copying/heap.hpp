// SPDX-License-Identifier: MIT
// copying_host::heap: a small generational copying collector with palrt inside.
//
// The heap (all spaces mmap'd, space.hpp):
//   nursery   two halves; mutators allocate in one, by TLABs carved with one fetch_add. A
//             young collection copies its survivors into the old space (Cheney) and closes
//             it (PROT_NONE); the next young collection allocates in the other half.
//   old       two semispaces; a young collection bumps into the current one, a full
//             collection copies the nursery and the current one into the other and closes
//             the one it left.
//   pinned    a non-moving space (bump, then per-size free lists), old from birth, marked in
//             place by full collections: the only objects a pinned handle may hold.
//
// Why pinned objects live in a space of their own (CoreCLR's pinned object heap, .NET 5)
// and not on nursery pages kept in place: a semispace nursery is reused whole after each
// young collection, and a page held back for a pinned object would have to be skipped by
// the bump allocator, its other objects kept or filled, and the same again in the old
// semispaces; a host that knows at allocation time that an object will be pinned (a buffer
// handed to the kernel, native code that keeps the address) allocates it with
// allocate_pinned() and the moving spaces stay simple. A pinned handle to an object outside
// the pinned space is a host bug, reported and aborted on at the next collection.
//
// Roots: every attached thread's shadow stack (mutator::roots), the globals, the
// finalization queue, palrt's strong and pinned handles, and, for a young collection, the
// remembered set (old and pinned-space objects a mutator stored a nursery pointer into:
// write()). palrt's handle table is the heap's handle table: see collector.cpp for the order
// of its walks, with ages (handle_table.hpp, "Generations") so that a young collection visits
// only the blocks of handles stored since the last collection.
//
// Finalization: an object allocated with `finalizable` that a collection finds dead is kept
// (copied, with what it reaches), its flag cleared (a finalizer runs once) and queued; a
// palrt::gc::finalizer_thread made from finalization_source() runs the finalizer, attached
// to the heap as a mutator for the time of its run_ready() call. weak_long handles keep
// tracking it; a finalizer that stores it in a global resurrects it.
//
// Threads: safepoint.hpp. Every member that allocates or collects is a safepoint; pointers
// to objects held in locals are valid until the thread's next safepoint only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "object.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "safepoint.hpp"
#include "space.hpp"

namespace copying_host {

struct heap_options {
  std::size_t nursery_bytes = std::size_t{1} << 20;  // each half
  std::size_t old_bytes = std::size_t{48} << 20;     // each semispace
  std::size_t pinned_bytes = std::size_t{4} << 20;
  std::size_t tlab_bytes = std::size_t{8} << 10;
  unsigned full_every = 8;  // one collection in this many triggered by allocation is full
};

enum class collection_kind : std::uint8_t { young, full };
const char* collection_kind_name(collection_kind k) noexcept;

struct collection_stats {
  collection_kind kind = collection_kind::young;
  std::uint64_t number = 0;   // 1 for the first collection
  std::int64_t pause_ns = 0;  // the collection's work with the world stopped (observers excluded)
  std::size_t copied_bytes = 0;
  std::size_t promote_rounds = 0;  // dependent promotions (one per collection)
  std::size_t weak_short_cleared = 0;
  std::size_t weak_long_cleared = 0;
  std::size_t dependents_cleared = 0;
  std::size_t finalizers_queued = 0;
  std::size_t pinned_freed = 0;
};

class heap;

// Called by the collecting thread with the world stopped: before() before anything moved,
// after() once the collection is complete (and age_handles() ran). The suite's oracle.
class collection_observer {
 public:
  virtual ~collection_observer() = default;
  virtual void before(heap&, collection_kind) {}
  virtual void after(heap&, const collection_stats&) {}
};

class heap {
 public:
  explicit heap(palrt::gc::handle_table& table, heap_options options = {});
  heap(const heap&) = delete;
  heap& operator=(const heap&) = delete;
  ~heap();

  palrt::gc::handle_table& handles() const noexcept { return table_; }
  const heap_options& options() const noexcept { return options_; }

  // --- Threads (safepoint.hpp) ---
  void attach(mutator& m) { world_.attach(m); }
  // Hands the thread's remembered set and young finalizable objects to the heap.
  void detach(mutator& m);
  void poll(mutator& m) {
    if (world_.stop_requested()) [[unlikely]]
      world_.park(m);
  }
  void enter_native(mutator& m) { world_.enter_native(m); }
  void leave_native(mutator& m) { world_.leave_native(m); }

  // --- Allocation: safepoints (may collect). Fields start null, the payload zeroed. ---
  // flags: object_flag::finalizable or 0. Throws std::length_error above max_object_bytes.
  object* allocate(mutator& m, std::size_t fields, std::size_t payload, std::uint8_t flags = 0);
  // In the non-moving space (the only objects a pinned handle may hold). Aborts, naming the
  // space, when it is full even after a full collection.
  object* allocate_pinned(mutator& m, std::size_t fields, std::size_t payload, std::uint8_t flags = 0);

  // The write barrier: obj's field i = value. An old or pinned-space object that gets a
  // nursery pointer goes into the thread's remembered set, once (the atomic bit; relaxed: it
  // only dedupes, the set itself is the thread's and the safepoint's lock publishes it).
  void write(mutator& m, object* obj, std::size_t i, object* value) noexcept {
    obj->slots()[i] = value;
    if (value && nursery_->contains(value) && !nursery_->contains(obj) &&
        !obj->remembered.exchange(1, std::memory_order_relaxed))
      m.remembered.push_back(obj);
  }

  // --- Collections (a safepoint for `self`; null from a thread that is not attached) ---
  void collect(mutator* self, collection_kind kind);
  std::uint64_t collections() const noexcept { return collections_.load(std::memory_order_relaxed); }
  std::uint64_t young_collections() const noexcept { return young_.load(std::memory_order_relaxed); }
  std::uint64_t full_collections() const noexcept { return full_.load(std::memory_order_relaxed); }

  // --- Globals: roots any attached thread may read and write (a finalizer resurrects an
  // object by storing it in one). ---
  std::size_t add_global(object* o);
  object* global(std::size_t i);
  void set_global(std::size_t i, object* o);

  // --- Finalization ---
  // Runs on the finalizer thread, attached as `m`; `o` is valid until the finalizer's first
  // safepoint, and stays reachable from m.roots.front() until it returns.
  using finalizer_fn = std::function<void(heap&, mutator& m, object* o)>;
  void set_finalizer(finalizer_fn f) { finalizer_ = std::move(f); }
  palrt::gc::host_finalization_source finalization_source() noexcept { return {&heap::run_ready, this}; }
  // Signalled after a collection that queued finalizers (its signal_work()).
  void set_finalizer_thread(palrt::gc::finalizer_thread* t) noexcept { finalizer_thread_ = t; }

  // --- Hooks ---
  void set_observer(collection_observer* o) noexcept { observer_ = o; }
  // died(wrapper): with the world stopped, once per dead wrapper object (object_flag::wrapper)
  // the weak_short sweep cleared; after_resume(): on the collecting thread once the world
  // runs again (wrappers.hpp erases and retires there).
  void set_wrapper_hooks(std::function<void(object*)> died, std::function<void()> after_resume) {
    wrapper_died_ = std::move(died);
    wrapper_after_resume_ = std::move(after_resume);
  }

  // --- Introspection, for an oracle: with the world stopped (from an observer) ---
  bool in_nursery(const void* p) const noexcept { return nursery_->contains(p); }
  bool in_old(const void* p) const noexcept { return old_->contains(p); }
  bool in_pinned(const void* p) const noexcept { return pinned_.contains(p); }
  // Whether a collection of `kind` may reclaim o (young: the nursery; full: everything).
  bool condemned(const object* o, collection_kind kind) const noexcept {
    return kind == collection_kind::full || nursery_->contains(o);
  }
  // Every root but palrt's handles: shadow stacks, globals, the finalization queue.
  template <class F>
  void for_each_root(F&& f) const {
    for (mutator* m : world_.mutators())
      for (object* o : m->roots) f(o);
    for (object* o : globals_) f(o);
    for (object* o : ready_) f(o);
  }
  // Every object of the old space and every allocated pinned-space object (dead or not:
  // what a young collection does not condemn).
  template <class F>
  void for_each_old_object(F&& f) const {
    for (std::byte* p = old_->begin(); p < old_top_;) {
      auto* o = reinterpret_cast<object*>(p);
      p += o->bytes;
      f(o);
    }
    for (std::byte* p = pinned_.begin(); p < pinned_top_;) {
      auto* o = reinterpret_cast<object*>(p);
      p += o->bytes;
      if (!o->has(free_block)) f(o);
    }
  }
  // Every object whose finalizer has not been queued yet.
  template <class F>
  void for_each_finalizable(F&& f) const {
    for (object* o : old_finalizable_) f(o);
    for (object* o : detached_finalizable_) f(o);
    for (mutator* m : world_.mutators())
      for (object* o : m->young_finalizable) f(o);
  }
  // For a fault report (async-signal-safe: reads a few pointers): the space p is in, or null.
  const char* region_of(const void* p) const noexcept;

 private:
  class collection;  // collector.cpp
  static std::size_t run_ready(void* self);
  bool refill(mutator& m, std::size_t bytes) noexcept;
  void collect_for_allocation(mutator& m);
  collection_stats collect_stopped(collection_kind kind);  // with the world stopped
  void after_resume(const collection_stats& stats);
  void init(object* o, std::size_t bytes, std::size_t fields, std::uint8_t flags) noexcept;

  palrt::gc::handle_table& table_;
  const heap_options options_;
  world world_;

  space nursery_halves_[2];
  space old_semispaces_[2];
  space pinned_;
  // Changed by collections only (world stopped); read by mutators after the safepoint's lock.
  space* nursery_;
  space* old_;
  std::byte* old_top_;
  // The nursery's bump offset: TLABs are carved with fetch_add (relaxed: each claims a range
  // no one else gets; what it writes there is published by the safepoint's lock).
  std::atomic<std::size_t> nursery_offset_{0};

  std::mutex pinned_lock_;  // allocate_pinned (never held across a safepoint)
  std::byte* pinned_top_;
  std::unordered_map<std::size_t, std::vector<object*>> pinned_free_;

  std::mutex globals_lock_;  // never held across a safepoint
  std::vector<object*> globals_;

  std::mutex ready_lock_;  // the finalization queue; never held across a safepoint
  std::deque<object*> ready_;
  std::vector<object*> old_finalizable_;       // collector only (world stopped)
  std::vector<object*> detached_finalizable_;  // detach() (under the world's lock) and collector
  std::vector<object*> detached_remembered_;
  finalizer_fn finalizer_;
  palrt::gc::finalizer_thread* finalizer_thread_ = nullptr;

  collection_observer* observer_ = nullptr;
  std::function<void(object*)> wrapper_died_;
  std::function<void()> wrapper_after_resume_;

  std::atomic<std::uint64_t> collections_{0}, young_{0}, full_{0};
  std::uint64_t allocation_collections_ = 0;  // collector only
  static inline std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace copying_host

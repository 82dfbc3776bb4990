// SPDX-License-Identifier: MIT
// palrt::gc::handle_walk: one pass of a collector over one kind of handles, shared by any
// number of GC threads, limited to the generations the collection condemns.
//
// handle_table's own walks (sweep_weak, for_each_strong, promote_dependents, for_each_slot)
// are single-threaded and see every handle of a kind. A production collector wants two
// things more, and a handle_walk gives both:
//   - Parallel: several GC threads share one walk, each claiming whole blocks of 120 handles
//     (32 at a time, one fetch_add), so a sweep of a million handles on N threads takes about
//     1/N of the time (HotSpot's OopStorage::ParState does the same). Each thread calls the
//     same member on the same walk; each returns its own share (a sweep's count of cleared
//     handles), and the walk is over when every thread has returned. A walk does one pass:
//     calling a member again, or another member, after the blocks are claimed does nothing.
//   - Generational: a walk made for a collection that condemns generations 0..condemned visits
//     only the blocks whose age is at most `condemned` (handle_table.hpp, "Generations"): a
//     young collection's sweep, root scan or relocation costs in proportion to the handles
//     stored since the last collection, not to all handles. all_generations (the default)
//     visits every block, whatever its age: a full collection.
//
// Which walk a collection makes, in CoreCLR's order (handle_table.hpp lists it in full):
//   roots       handle_walk(t, strong, g).for_each_target(mark), and the same for pinned;
//               a moving collector first takes handle_walk(t, pinned, g).for_each_target()
//               to learn which objects it must not move, then evacuates
//   dependents  handle_walk(t, dependent, g).promote_dependents(is_alive, mark), a new walk
//               per round, until a round's counts add up to 0 (parallel, but a round per
//               link of a chain laid against the walk order); or one dependent_promotion
//               (palrt/gc/dependent_promotion.hpp), linear whatever the order, one GC thread
//   weak        handle_walk(t, weak_short, g).sweep(is_alive), ... weak_long, dependent; or,
//               for a moving collector, sweep_relocate(forward): one pass that clears the
//               dead and relocates the living
//   relocation  of strong and pinned handles (a compacting collector): for_each_slot()
//
// When it may run, and what it may rely on:
//   - World stopped: every member, from any number of GC threads at once. No lock is taken
//     and nothing is allocated (the walk is the caller's object: on its stack or in its
//     collector's state), so a stopped mutator may be anywhere in the table. A generational
//     walk (condemned < all_generations) must run with the world stopped: ages are written by
//     mutators without ordering a running collector could rely on, and age_handles() follows
//     the collection in the same pause.
//   - World running (a concurrently marking collector; full walks only, and no
//     sweep_relocate, which moves objects and so runs only with the world stopped): mutators may
//     allocate and release handles of the kind meanwhile. The walk never hands the host a
//     free slot or palrt's free marker, visits every handle that was allocated before the
//     walk was made and not released before the walk's end exactly once, and may or may not
//     visit a handle allocated or released during the walk (one allocated after the walk was
//     made, in a block added since, is never visited: it is the allocating mutator's, which
//     a concurrent collector covers with its own barrier, as it does any new object). A
//     handle released during the walk may be visited with the target it had, as a stale
//     read of a slot would give: a sweep or relocation then fails its compare-and-swap and
//     leaves the slot alone, and a root scan marks an object that was a root a moment ago
//     (marking too much, never too little). A target stored with set_target() during the
//     walk, into a handle the walk has passed, is not seen: a concurrently marking collector
//     treats it as any store of a reference into an object already scanned (its write
//     barrier, or the final pause's rescan). promote_dependents reads a primary and then its
//     secondary; set_secondary() racing it is the host's to exclude, as for the sweeps.
//   - A walk holds nothing while it calls out: a callback may read the table, or make and run
//     another walk.
// The walk's callables run on the calling GC thread, while other GC threads run theirs:
// they must be safe to call concurrently (a collector's mark and forward are).
//
// Cost: a full walk reads every block of the kind, 2.9-4.9 ns per handle per pass on the
// machines of docs/BENCHMARKS.md (a host's is_alive or forward is the rest); a generational
// walk reads one age byte per block (834 bytes for 100,000 handles) and then only the
// condemned blocks.
//
// Cancellation: no member is a cancellation point (nothing here blocks).
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "palrt/gc/detail/walk_callbacks.hpp"
#include "palrt/gc/handle_table.hpp"

namespace palrt::gc {

class handle_walk {
 public:
  // A walk of the handles of `kind` in `table` whose blocks have an age of at most
  // `condemned`. Made once per pass, by one thread, before the GC threads that share it
  // start; it must outlive them. Reads how many blocks the kind has (the walk covers those).
  // Throws std::invalid_argument for an unknown kind.
  handle_walk(const handle_table& table, handle_kind kind, std::uint8_t condemned = all_generations);
  handle_walk(const handle_walk&) = delete;
  handle_walk& operator=(const handle_walk&) = delete;

  handle_kind kind() const noexcept { return kind_; }
  std::uint8_t condemned() const noexcept { return condemned_; }

  // --- Sweeps (weak_short, weak_long, dependent; std::invalid_argument otherwise) ---
  // As handle_table::sweep_weak: clears each handle whose target is not alive (compare-and-
  // swap: a slot changed since it was read is left alone) and calls on_cleared(target,
  // secondary) for it. Returns how many this thread cleared.
  template <class IsAlive, class OnCleared>
  std::size_t sweep(IsAlive&& is_alive, OnCleared&& on_cleared) {
    return sweep_erased(detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>,
                        detail::erase(on_cleared), &detail::call_cleared<std::remove_reference_t<OnCleared>>);
  }
  template <class IsAlive>
  std::size_t sweep(IsAlive&& is_alive) {
    return sweep_erased(detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>, nullptr,
                        nullptr);
  }
  // As handle_table::sweep_weak_batched: the test called once per up to
  // handle_table::sweep_batch targets, is_alive(std::span<void* const>, std::span<bool>).
  template <class IsAliveBatch, class OnCleared>
  std::size_t sweep_batched(IsAliveBatch&& is_alive, OnCleared&& on_cleared) {
    return sweep_batched_erased(detail::erase(is_alive), &detail::call_batch<std::remove_reference_t<IsAliveBatch>>,
                                detail::erase(on_cleared), &detail::call_cleared<std::remove_reference_t<OnCleared>>);
  }
  template <class IsAliveBatch>
  std::size_t sweep_batched(IsAliveBatch&& is_alive) {
    return sweep_batched_erased(detail::erase(is_alive), &detail::call_batch<std::remove_reference_t<IsAliveBatch>>,
                                nullptr, nullptr);
  }

  // --- Sweep and relocate in one pass (weak_short, weak_long, dependent) ---
  // For a moving collector, after it has evacuated what lives: calls forward(target) for each
  // non-null target, which returns where the object is now (itself, if it did not move), or
  // null if it is dead. A dead target's handle is cleared and reported, on_cleared(target,
  // secondary), as by sweep(); a moved one is relocated. A dependent handle whose primary
  // lives has its secondary forwarded too (forward(secondary) must give its address: the
  // secondary of a live primary was promoted). With the world stopped only (objects move
  // only then): a relocation is a plain store of the new address, a clear a compare-and-swap
  // as in sweep() (exactly one owner of a dependent's secondary). A mutator stopped inside a
  // release or a set_target of the handle stores after it resumes, and its store wins. Returns
  // how many this thread cleared. The same as sweep() and then for_each_slot() relocating,
  // in one pass, and within 1.2x of a sweep alone (docs/BENCHMARKS.md).
  template <class Forward, class OnCleared>
  std::size_t sweep_relocate(Forward&& forward, OnCleared&& on_cleared) {
    return sweep_relocate_erased(detail::erase(forward), &detail::call_forward<std::remove_reference_t<Forward>>,
                                 detail::erase(on_cleared), &detail::call_cleared<std::remove_reference_t<OnCleared>>);
  }
  template <class Forward>
  std::size_t sweep_relocate(Forward&& forward) {
    return sweep_relocate_erased(detail::erase(forward), &detail::call_forward<std::remove_reference_t<Forward>>,
                                 nullptr, nullptr);
  }

  // --- Roots and slots (any kind) ---
  // Calls visit(target) for each non-null target: the roots of strong and pinned handles,
  // or, for pinned ones before a moving collector evacuates, the objects it must not move.
  template <class Visit>
  void for_each_target(Visit&& visit) {
    for_each_target_erased(detail::erase(visit), &detail::call_visit<std::remove_reference_t<Visit>>);
  }
  // Calls visit(handle_slot) for each handle, through which the collector reads and
  // relocates the target (and a dependent handle's secondary) as with
  // handle_table::for_each_slot.
  template <class Visit>
  void for_each_slot(Visit&& visit) {
    for_each_slot_erased(detail::erase(visit), &detail::call_slot<std::remove_reference_t<Visit>>);
  }

  // --- Dependent promotion (dependent; std::invalid_argument otherwise) ---
  // As handle_table::promote_dependents: mark(secondary) for each handle whose primary is
  // alive and whose secondary is not; returns how many this thread marked. A round is one
  // walk: the host makes a new one per round, and stops when a round's threads together
  // marked nothing.
  template <class IsAlive, class Mark>
  std::size_t promote_dependents(IsAlive&& is_alive, Mark&& mark) {
    return promote_erased(detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>,
                          detail::erase(mark), &detail::call_visit<std::remove_reference_t<Mark>>);
  }

 private:
  friend class handle_table;
  // Claims the next range of blocks [begin, end) with an age of at most condemned_ in it:
  // false once the walk's blocks are all claimed.
  bool claim(std::size_t& begin, std::size_t& end) noexcept;
  // Calls f(block, index) for every taken slot of every block this thread claims (handle_walk.cpp).
  template <class F>
  void for_each_claimed_slot(F&& f);
  std::size_t sweep_erased(void* is_alive, detail::predicate_fn, void* on_cleared, detail::cleared_fn);
  std::size_t sweep_batched_erased(void* is_alive, detail::batch_fn, void* on_cleared, detail::cleared_fn);
  std::size_t sweep_relocate_erased(void* forward, detail::forward_fn, void* on_cleared, detail::cleared_fn);
  void for_each_target_erased(void* visit, detail::visit_fn);
  void for_each_slot_erased(void* visit, detail::slot_fn);
  std::size_t promote_erased(void* is_alive, detail::predicate_fn, void* mark, detail::visit_fn);

  const handle_table& table_;
  const handle_kind kind_;
  const std::uint8_t condemned_;
  std::size_t end_;  // the kind's blocks when the walk was made
  // The next block to claim; on a line of its own, the one line GC threads write.
  alignas(64) std::atomic<std::size_t> next_{0};
  char pad_[64 - sizeof(std::atomic<std::size_t>)];
};

}  // namespace palrt::gc

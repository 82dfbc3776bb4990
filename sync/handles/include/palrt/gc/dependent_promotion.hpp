// SPDX-License-Identifier: MIT
// palrt::gc::dependent_promotion: dependent handles (ephemerons) promoted in time linear in
// their number, whatever the order of their primaries and secondaries, for any collector:
// one with a promote-again loop, one that moves objects, one with no loop at all.
//
// The problem. A dependent handle keeps its secondary alive while its primary lives. The
// table's promote_dependents() (and a handle_walk round of it) marks the secondaries of the
// handles whose primary is alive, and the collector repeats it until a round marks nothing:
// a chain of dependents laid out against the walk order (d1's secondary is d2's primary, and
// d2 comes before d1) needs a round per link, so n links cost n rounds of n handles: a
// 4,000-link chain took 157-330 ms with the world stopped (docs/BENCHMARKS.md). The table's
// index_dependents option is linear, but keeps the handles by primary for their whole life,
// with a lock on every allocate and release, and cannot follow a primary that moves.
//
// The way out. A promotion made at the start of a collection's dependent phase walks the
// dependent handles once (start()): a handle whose primary is alive has its secondary
// marked at once; the others are linked into chains by their primary, in buckets the table
// keeps ready (nothing is allocated: the world is stopped). From then on, whenever the
// collector marks an object (or evacuates it: a moving collector passes the address the
// handles hold, from before the move), it calls on_marked(object), which marks the secondaries
// of the handles waiting on that object and unlinks them. Every handle is linked at most once
// and unlinked at most once: the whole promotion costs one walk of the condemned dependent
// blocks and a hash lookup per marked object. At the end the handles still linked (pending())
// are those whose primary is dead, which the dependent sweep then clears. The index lives for
// one collection, built from the addresses the handles hold at its start, so a collector
// that moves objects uses it, and then relocates with handle_walk::sweep_relocate.
//
// Example (a tracing collector with a mark stack):
//   gc::dependent_promotion promotion(table, condemned);
//   auto mark = [&](void* o) { if (heap.set_mark(o)) stack.push(o); };   // idempotent
//   promotion.start([&](void* o) { return heap.is_marked(o); }, mark);
//   while (!stack.empty()) {                                  // the collector's own drain
//     void* o = stack.pop();
//     heap.trace_fields(o, mark);
//     promotion.on_marked(o, mark);                           // the dependents waiting on o
//   }
// A collector with no promote-again loop (Boehm's per-object mark procedure) calls
// on_marked() from where it marks each object, as it would for_each_secondary_of() on an
// indexed table; one whose marking has a loop anyway may keep handle_walk rounds.
//
// When it may be used: with the world stopped, from the start of the dependent phase (after
// the roots, or at any point of the mark: a handle whose primary is already marked has its
// secondary marked by start()) until the dependent sweep, by one GC thread at a time (start
// and on_marked are not to be called concurrently; a parallel marker funnels them through
// one thread, or uses handle_walk rounds, each of which is parallel). One promotion at a time
// per table. It takes no lock and allocates nothing. mark() may call on_marked() again
// (recursive marking): the handles an on_marked() is about to report are unlinked first.
//
// Cost: start() ~ a sweep of the condemned dependent blocks (a generational promotion, made
// with a condemned generation, walks the blocks of that age or younger only); on_marked() a
// multiply, one load of a bucket head and, where dependents wait on the object, their links.
// Memory: 8 bytes per dependent slot for the links and 4 for the buckets, kept by the table.
//
// Cancellation: nothing here blocks.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstddef>
#include <cstdint>

#include "palrt/gc/detail/walk_callbacks.hpp"
#include "palrt/gc/handle_table.hpp"

namespace palrt::gc {

class dependent_promotion {
 public:
  // A promotion of the dependent handles of `table` in the blocks whose age is at most
  // `condemned` (all, by default). Takes the next epoch of the table's buckets: constructing
  // a new promotion makes the previous one's chains unreadable, so a promotion is used only
  // until the next one is made (start and on_marked throw std::logic_error after that, while
  // handles wait on it). World stopped.
  explicit dependent_promotion(const handle_table& table, std::uint8_t condemned = all_generations) noexcept;
  dependent_promotion(const dependent_promotion&) = delete;
  dependent_promotion& operator=(const dependent_promotion&) = delete;

  // The one walk: for each dependent handle with a non-null primary, if is_alive(primary),
  // mark(secondary) (when the secondary is not null and not alive); otherwise the handle waits
  // on its primary. Returns how many secondaries it marked. Once per promotion (a second
  // call throws std::logic_error).
  template <class IsAlive, class Mark>
  std::size_t start(IsAlive&& is_alive, Mark&& mark) {
    return start_erased(detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>,
                        detail::erase(mark), &detail::call_visit<std::remove_reference_t<Mark>>);
  }
  // The collector marked (or evacuated) `object`, at the address the handles held when the
  // promotion started: marks the non-null secondary of each handle waiting on it, and returns
  // how many. Each waiting handle is reported once, by the first on_marked() of its primary.
  // Throws std::logic_error if a newer promotion of the table was made since (and handles
  // wait on this one).
  template <class Mark>
  std::size_t on_marked(const void* object, Mark&& mark) {
    return on_marked_erased(object, detail::erase(mark), &detail::call_visit<std::remove_reference_t<Mark>>);
  }
  // Handles still waiting: their primaries were not marked (yet).
  std::size_t pending() const noexcept { return pending_; }

 private:
  std::size_t start_erased(void* is_alive, detail::predicate_fn, void* mark, detail::visit_fn);
  std::size_t on_marked_erased(const void* object, void* mark, detail::visit_fn);

  const handle_table& table_;
  const std::uint8_t condemned_;
  std::uint64_t epoch_;  // in the top byte, as the buckets' heads carry it
  std::size_t end_;      // the dependent blocks when the promotion was made
  void* buckets_;        // the table's bucket table then (internal::promotion_buckets::table)
  bool indexed_;         // the table keeps an index (its blocks' side areas are laid out so)
  std::size_t pending_ = 0;
  bool started_ = false;
};

}  // namespace palrt::gc

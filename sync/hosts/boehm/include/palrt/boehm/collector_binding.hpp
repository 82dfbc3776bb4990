// SPDX-License-Identifier: MIT
// palrt::boehm::collector_binding: palrt's handle table, identity caches and finalizer thread
// driven by the Boehm-Demers-Weiser collector (Debian's libgc-dev, 8.2), the wiring every
// host on Boehm would otherwise write again (handle_table.hpp says what a host's collector
// must do; this is that, for Boehm). Link libpalrt-boehm.a (pkg-config palrt-boehm) and -lgc.
//
//   GC_INIT();                                      // first, on the main thread
//   gc::handle_table table(gc::handle_table_options{.index_dependents = true});
//   boehm::collector_binding binding(table);        // before palrt starts any thread
//   boehm::identity_cache cache;  binding.add_cache(cache);
//   gc::finalizer_thread finalizer(boehm::collector_binding::finalization_source());
//   finalizer.start();  binding.serve_finalizers(finalizer);
//
// What it does at each point of a Boehm collection (not incremental: the constructor refuses
// a collector in incremental mode, whose marking runs with the world running):
//   marking       strong handles are roots (GC_set_push_other_roots: their targets are
//                 pushed, with the world stopped). Objects allocated with allocate_traced()
//                 are marked by a procedure of palrt's that scans them as Boehm would and
//                 then marks and traces the secondaries of their dependent handles
//                 (handle_table::for_each_secondary_of): a secondary lives exactly while its
//                 primary is marked, by the mark or by finalization, and what it points to
//                 is traced.
//   MARK_END      (world stopped) the read gate closes (handle_table::close_tracking_reads),
//                 and the identity caches added are swept (entries of unmarked wrappers go).
//   RECLAIM_START (world running, Boehm's lock held, before its finalization) weak-short
//                 handles of unmarked targets are cleared: out of the stopped pause, as
//                 Boehm clears its own short links.
//   RECLAIM_END   (after finalization marked what finalizers keep alive) weak-long and
//                 dependent handles of dead targets are cleared; the gate opens.
// Reads. With this binding a mutator reads every weak and dependent handle through the gate
// (gated_target, gated_secondary): weak-short targets too, as they are cleared after the
// world restarts. A gated read waits only while a collection is between its mark and its
// reclaim; outside one it is two loads. target() and secondary() are the raw reads: right
// for strong handles, and under Boehm's lock (GC_call_with_alloc_lock), where no collection
// is in progress; on a weak or dependent handle elsewhere they may return an object Boehm
// found dead at MARK_END and reclaims before the sweeps clear it. release() reads through
// the gate as well: a release of a weak or dependent handle between a mark and its sweeps
// waits for them, and returns null for a target they cleared.
//
// Rules for the host:
//   - Targets, secondaries and cached wrappers are Boehm objects, by their base address
//     (GC_MALLOC's result): the sweeps ask Boehm about them (GC_is_marked, GC_base).
//   - A dependent handle's primary is an object from allocate_traced() (others are marked
//     by Boehm alone, which does not know their secondaries), in a table made with
//     handle_table_options::index_dependents.
//   - handle_table::allocate() and release() may be called from any thread at any time: a
//     thread stopped inside one holds no lock the collection needs. Threads that hold
//     Boehm objects are registered with Boehm (GC_register_my_thread, or
//     scoped_thread_registration); palrt's own threads, started after the binding, are
//     (thread hooks on palrt's thread factory).
//   - Finalizers registered with GC_register_finalizer* run on palrt's finalizer thread once
//     serve_finalizers() is called (GC_set_finalize_on_demand), otherwise where Boehm runs
//     them.
//
// One binding per process (Boehm's hooks are process-wide). The constructor chains the hooks
// it finds (push_other_roots, the collection event callback: theirs run first) and the
// destructor puts them back; it claims the table for its collector (claim_for_collector).
// A collection event callback set after the binding must call the one it replaces (what
// GC_get_on_collection_event() returned): the binding's sweeps run there. One that does not
// would leave every weak handle to dangle; the binding finds that out at the next
// collection's mark (its callback did not see the mark start) and prints one line on stderr
// and aborts, before Boehm reclaims anything. The same if Boehm is switched to incremental
// mode after the binding.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstddef>
#include <cstdint>

#include "palrt/boehm/identity_cache.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"

namespace palrt::boehm {

struct binding_counters {
  std::uint64_t collections = 0;  // collections whose reclaim ended with the binding
  std::uint64_t weak_short_cleared = 0;
  std::uint64_t weak_long_cleared = 0;
  std::uint64_t dependent_cleared = 0;
  std::uint64_t cache_entries_swept = 0;  // identity-cache entries of dead wrappers
  std::uint64_t strong_roots_pushed = 0;  // strong targets pushed, over all collections
  std::uint64_t finalizer_notifications = 0;
};

class collector_binding {
 public:
  // Installs the hooks and claims `table`. Call after GC_INIT(), from a thread registered
  // with Boehm. Throws std::logic_error if a binding exists already, if Boehm runs in
  // incremental mode, or if the table is claimed by another collector (nothing installed).
  explicit collector_binding(gc::handle_table& table);
  // Stops serving finalizers, removes the hooks (the ones chained are put back) and gives
  // the table up. Call it when no collection can find palrt's handles needed any more.
  ~collector_binding();
  collector_binding(const collector_binding&) = delete;
  collector_binding& operator=(const collector_binding&) = delete;

  // An identity cache swept at MARK_END from now on (up to 16; std::length_error beyond).
  // remove_cache() returns once no collection sweeps it; destroy a cache only after.
  void add_cache(identity_cache& cache);
  void remove_cache(identity_cache& cache) noexcept;

  // A Boehm object (cleared, like GC_MALLOC's) whose marking traces the secondaries of its
  // dependent handles: the primaries of dependent handles. Throws std::bad_alloc, and
  // std::logic_error when the table was not made with index_dependents.
  [[nodiscard]] void* allocate_traced(std::size_t bytes);
  // Whether `object` is one (for a host's checks).
  static bool is_traced(const void* object) noexcept;

  // The finalizer thread's source of work: Boehm's ready finalizers (GC_invoke_finalizers).
  static gc::host_finalization_source finalization_source() noexcept;
  // From now on Boehm's finalizers run on `thread` (made from finalization_source()): Boehm
  // only queues them (finalize on demand) and tells the thread (the finalizer notifier).
  // stop_serving_finalizers() gives them back to Boehm (run on allocating threads again).
  void serve_finalizers(gc::finalizer_thread& thread);
  void stop_serving_finalizers() noexcept;

  binding_counters counters() const noexcept;

 private:
  struct hooks;
  gc::handle_table& table_;
};

}  // namespace palrt::boehm

// SPDX-License-Identifier: MIT
// palrt::gc::collector: palrt's embedded default collector, the host that runs the handle
// table when there is no host GC.
//
// Life cycle of an object (object.hpp) belonging to a collector:
//   1. live: references (ref<T>, strong handles, dependent handles' secondaries) keep it.
//   2. dead: its count reached zero (terminal: try_get() cannot revive it). The dropping
//      thread pushed it onto its own dead list of that collector (one per thread, so that
//      threads making and dropping objects share no cache line); nothing is freed yet.
//   3. collect() takes every thread's dead list (of threads alive or exited) and, in the
//      host-GC order of handle_table.hpp:
//      - clears the short weak handles of every dead object;
//      - queues the dead objects registered for finalization to the finalizer thread
//        (finalizer_thread.hpp); they keep their long weak and dependent handles. Without a
//        finalizer thread, collect() runs them itself (below);
//      - clears the long weak handles and dependent handles of the others (a dependent
//        handle's secondary loses the reference the handle held), and retires them;
//      - frees retired objects once a grace period has passed (read_section.hpp): one
//        process-wide barrier, then every reader that was in a read section when they were
//        unlinked has left it. A try_get() that raced the collection never touches freed
//        memory. What cannot be freed yet is freed by a later collect() or synchronize().
//   4. A finalized object comes back to the next collect(): unless its finalizer resurrected
//      it, its long weak handles are cleared and it is retired.
// Destructors run on the thread that frees (collect()'s caller, or the allocating thread for
// the automatic collections of collector_options). Objects that a destructor
// or a cleared dependent handle leaves dead are collected by the same collect(), in further
// rounds, as long as each round finds new ones it caused.
//
// Order. A collect() takes up every object whose death happened before it was called.
// Objects that died on one thread are finalized (queued, run) in the order they died, whether
// one collect() finds them or several. Objects that died on different threads
// have no order between them, except that those one collect() queued are finalized before
// those a later one queues (the queue is FIFO; a finalized or resurrected object's later
// passes are ordered by when it died again). "Oldest first" (here and in
// finalizer_thread.hpp) means this order. It is weaker than the single dead list palrt had
// before, which also ordered deaths on different threads when one happened before the other;
// a host that needs that orders the deaths' collections (a collect() between them).
// Out of memory for a thread's list (an 8 KiB block per 64 threads and collector), a death
// goes to a shared list and may come out after that thread's later deaths: nothing is lost.
//
// Without a finalizer thread (none attached to this collector, none started yet, or stopped:
// after runtime::shutdown(), say), dead finalizable objects are not left in a queue nobody
// drains: collect() runs their finalizers itself before it returns, on the calling thread,
// once it has dropped its lock, oldest first, one at a time (a collect() that finds another
// thread doing so leaves its objects to that thread, which runs them before it returns).
// Those left queued by a finalizer thread that stopped are run the same way, by the next
// collect(), all of them, also while a thread that missed its stop deadline is still inside
// a finalizer (finalizer_thread.hpp: the thread holds only that one). Exceptions are
// contained as on the finalizer thread: counted (collector_counters), the first reported on
// stderr, and the others run on. As with the finalizer thread, a finalized object is freed
// by the next collect(). Automatic collections (collector_options::collect_every) do the
// same on the allocating thread. The collector's destructor runs no finalizer (see there).
//
// Cost: a collection walks the table's weak and dependent handles (three sweeps) and runs one
// process-wide barrier; allocation and reference counting never wait for it.
//
// The grace periods use pal's process barrier (process_barrier.hpp). A host that does not
// start through startup::bootstrap() (a plugin host) should call
// pal::initialize_process_barrier() early, before its first collect(), and best while it has
// one thread: otherwise the first collect() that frees something initialises the barrier,
// registering for membarrier whenever that is (with threads alive the kernel makes that wait
// for milliseconds), and process_barrier_state::initialized_on_first_use says so.
//
// Thread safety: collect() may be called from any thread, also concurrently (one collects,
// the others wait for it), also from a finalizer. From a destructor that collect() is
// running, it returns at once (an empty report). Every table that holds handles to a
// collector's objects must be that collector's table: the typed handles (typed_handles.hpp)
// see to it. One collector per table: a second collector on a table that a live collector
// sweeps is refused (std::logic_error, handle_table::claim_for_collector).
//
// Cancellation: collect() (the automatic collections too), synchronize() and the destructor
// are neither POSIX cancellation points nor Boost interruption points, though a grace period
// may read /proc (the signal barrier) and synchronize() sleeps: a pending pthread_cancel()
// acts at the caller's next cancellation point after the call. The finalizers collect() runs
// itself run with cancellation disabled, as on the finalizer thread, which nobody cancels: a
// cancellation point in one does not act there (the request waits until after collect()),
// rather than unwind through palrt's containment of finalizers' exceptions, which glibc would
// answer by aborting the process.
//
// After fork() (palrt/pal/fork.hpp): in a child, a collector made before fork() is the
// parent's (a collection may have held its lock at fork(), and its finalizer thread is gone).
// collect() and synchronize() throw pal::forked_child_error; the automatic collections
// (collect_every) are skipped. Objects may still be made, referenced and dropped, and
// counters() read: none of that takes a lock, and nothing is ever freed there. Destroying
// it returns at once and keeps its state, and every object, allocated until the child
// exits. A collector made in the child is the child's: its grace periods wait for the
// child's own readers only.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/object.hpp"

namespace palrt::gc {

namespace internal {
struct collector_state;
class collector_access;
}  // namespace internal

struct collector_options {
  // Collect on the allocating thread about every `collect_every` allocations (each thread
  // counts its own), skipped if another collection is running then (an allocation never
  // waits for one); 0 (the default): only explicit collect(). Such a collection takes,
  // 63 times in 64, only what died on its own thread, and frees what it can after dropping
  // the collector's lock, so that threads allocating at once collect at once, each freeing
  // its own objects on its own CPU; what it retires is freed by a later one of the same
  // thread (or by collect()), and deaths its destructors cause wait for the next. The 64th
  // time it also sweeps up the lists of threads that do not collect their own (threads that
  // never allocate, threads that exited): what dies there waits for that, or for collect().
  // It leaves the lists of threads that collected their own since the last sweep (their
  // objects are freed on their own CPUs), unless something died on the shared list (a thread
  // while it exits, a thread beyond the 4096th alive): then, and on a thread beyond the
  // 4096th, it collects everything, as collect() does.
  std::size_t collect_every = 0;
};

struct collection_report {
  std::size_t found_dead = 0;  // dead objects taken up (incl. finalized ones back)
  std::size_t queued_for_finalization = 0;
  std::size_t weak_short_cleared = 0;
  std::size_t weak_long_cleared = 0;
  std::size_t dependent_cleared = 0;
  std::size_t retired = 0;                // unlinked, to be freed after a grace period
  std::size_t freed = 0;                  // freed by this collection (also of earlier ones)
  std::size_t awaiting_grace_period = 0;  // retired and not freed yet, after it
  std::size_t rounds = 0;
  // finalize() calls this collect() ran itself, no finalizer thread being attached (see the
  // top of this file); 0 if another thread's collect() ran them.
  std::size_t finalized_inline = 0;
};

struct collector_counters {
  std::uint64_t objects_created = 0;
  std::uint64_t objects_freed = 0;
  std::uint64_t collections = 0;
  std::uint64_t queued_for_finalization = 0;  // ever
  std::uint64_t finalization_pending = 0;     // queued and not finalized yet
  std::uint64_t awaiting_grace_period = 0;
  std::uint64_t finalized_inline = 0;             // finalize() calls collect() ran itself, ever
  std::uint64_t inline_finalizer_exceptions = 0;  // of them, the ones that threw
};

class collector {
 public:
  // The collector sweeps `table`, which must outlive it. Throws std::logic_error if another
  // collector sweeps `table` (one collector per table), std::bad_alloc.
  explicit collector(handle_table& table, collector_options options = {});
  collector(const collector&) = delete;
  collector& operator=(const collector&) = delete;
  // Collects what is dead (the finalizer must have been stopped first: objects still queued
  // for finalization are freed without their finalizer running, and counted by the
  // finalizer as left) and frees everything retired, waiting up to 2 s for readers. If
  // objects are still alive (the host holds references), says so on stderr and leaves its
  // state allocated, so that those references stay safe to drop later (they are not freed).
  ~collector();

  // See the top of this file. Throws only what a destructor of a freed object throws
  // (destructors must not throw: std::terminate) or std::bad_alloc, and
  // pal::forked_child_error in a fork()ed child (see above); what a finalizer it runs throws
  // is contained. Without a finalizer thread it returns after the finalizers it found due ran
  // (a finalizer that blocks blocks it).
  collection_report collect();
  // Frees what is retired, waiting up to `timeout` for readers to leave their sections.
  // true if nothing is left awaiting a grace period. pal::forked_child_error in a fork()ed
  // child.
  [[nodiscard]] bool synchronize(std::chrono::nanoseconds timeout = std::chrono::seconds(2));

  handle_table& handles() noexcept;
  // Objects created minus objects freed, and the other counters (relaxed snapshots).
  collector_counters counters() const noexcept;

 private:
  friend class internal::collector_access;
  friend class detail::object_access;
  std::shared_ptr<internal::collector_state> state_;
};

}  // namespace palrt::gc

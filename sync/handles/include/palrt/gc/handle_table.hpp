// SPDX-License-Identifier: MIT
// palrt::gc::handle_table: stable slots that refer to objects, for a runtime's GC.
//
// A handle is the address of one slot holding an object pointer (its target). Code that must
// not hold an object pointer directly across a collection (native code, a cache, a side
// table) holds a handle instead, and the host's garbage collector finds and updates every
// target through the table: strong handles are roots, weak handles are cleared when their
// target dies, a dependent handle keeps its secondary alive while its primary lives.
//
// Kinds (what a collection does to each):
//   strong      a root: the host marks its target; sweeps never clear it.
//   weak_short  cleared as soon as the target is found dead, before its finalizer runs, so
//               it never sees an object that is being finalized.
//   weak_long   tracks the target through finalization: cleared only when the target is
//               dead after finalization (not if the finalizer resurrected it).
//   dependent   a weak primary that keeps a secondary alive: while the primary lives the
//               host treats the secondary as reachable (promote_dependents); when the
//               primary dies the sweep clears it and reports the secondary, and from then
//               the handle yields neither (its secondary reads null). For side tables
//               keyed on objects.
//   pinned      a root, as strong, whose target a moving collector must not move (CoreCLR's
//               pinned handles: native code holds the object's address, a buffer handed to
//               the kernel, say). for_each_strong() visits these too; for_each_pinned(), or a
//               handle_walk of this kind, gives them alone, before the collector evacuates.
//
// A host GC's mark phase calls the table in this order (CoreCLR's order):
//   1. mark from the roots, for_each_strong() among them; then promote_dependents() until it
//      returns 0, marking from each secondary it reports;
//   2. close_tracking_reads() (the read gate, below), then sweep_weak(weak_short, is_alive);
//   3. the finalization scan: dead finalizable objects are kept for the finalizer and marked
//      from (then promote_dependents() again until 0);
//   4. sweep_weak(weak_long, is_alive) and sweep_weak(dependent, is_alive), then
//      open_tracking_reads().
// A collector with no "promote again" loop (Boehm marks what its finalization keeps alive and
// then sweeps, with no hook in between) makes the table with index_dependents and traces
// secondaries from its per-object mark procedure instead: marking an object, it asks for
// that object's secondaries (for_each_secondary_of) and marks and traces each, so a secondary
// lives exactly while its primary is marked, by whatever marks it, and what the secondary
// points to is traced like any object's fields. Its sweeps stay the same.
// palrt's embedded collector (collector.hpp) follows this order with reference counts. Every
// sweep has a batched form (sweep_weak_batched: the liveness test called once per up to 256
// targets). A moving collector visits the slots of each kind and relocates their targets
// (for_each_slot, handle_slot::relocate), or sweeps and relocates a weak kind in one pass
// (handle_walk::sweep_relocate).
//
// Parallel and generational walks: every walk above has a form that several GC threads
// share, each claiming whole blocks, and that a young collection limits to the handles that
// can point into the generations it condemns: palrt/gc/handle_walk.hpp. The table's own
// walks are those walks, made for all generations and run by the calling thread alone.
//
// Generations (ages). Each block of 120 handles has an age: the lowest generation any target
// in it may be in. A block is young (age 0) from the moment a target is stored in it
// (allocate, set_target, set_secondary: a load of the age byte, and a store when it was not
// 0 already, before the target's store and again after it), so a handle stored since the last
// collection is always in a young block. A collection that condemns generations 0..g walks
// the blocks of age <= g (handle_walk(table, kind, g)); at its end, with the world still
// stopped, the host calls age_handles(g, s), where s is the lowest generation the survivors of
// the condemned generations now are in (1 for a two-generation collector that copies a
// nursery's survivors into the old space; 0 for one whose survivors stay young for a while),
// and the blocks walked take age min(s, g + 1) (never lower than they were). A block's age is
// a promise about every target in it, so a young target stored into a block of old handles
// makes the whole block young: the cost of a young collection is in proportion to the blocks
// written since the last one (and at most all of them). Ages need the world stopped for the
// generational walks and age_handles(): a mutator stopped by a signal between its age store
// and its target store is covered by its second look at the age, which it makes on resuming
// (the collection may have aged the block meanwhile), but a running mutator is not ordered
// with a running collector. A collector that never names a generation (palrt's embedded
// one, the Boehm and CPython bindings) walks everything, and ages cost it one byte load per
// store.
//
// With the world stopped (a host that suspends its mutators to mark or sweep: Boehm at
// GC_EVENT_MARK_END, a JVM at a safepoint), a stopped thread may be anywhere in the table,
// holding any of its locks. These calls take no lock, allocate nothing and may be made then,
// in every build (a checked build's handle checks included): target, set_target, secondary,
// set_secondary, kind, sweep_weak, sweep_weak_batched, for_each_strong, promote_dependents,
// for_each_secondary_of, for_each_slot and handle_slot's members, close_tracking_reads, open_tracking_reads,
// gated_target and gated_secondary (from the thread that closed the gate), counters (walks
// every block). Never then: allocate() (a refill may take its kind's lock and allocate a
// block) and release() (a full cache returns slots into a shared structure, which may
// allocate room for them, and a thread's first release allocates its cache); the host queues
// what it would allocate or release and does it once the world runs again.
//
// The read rule, for weak_long and dependent targets: between the end of a host's mark and
// its weak_long and dependent sweeps, a dead target is still in its slot, and a mutator that
// reads it holds an object the collector is about to reclaim (with Boehm, that window is open
// with the world running: the world restarts after the mark, the sweeps come at
// GC_EVENT_RECLAIM_END). The gate closes it: a gated read (gated_target, gated_secondary)
// waits while the gate is closed, and returns what the sweeps left. target() is the raw read,
// right for strong handles, for weak_short handles of a host that sweeps them before the
// world runs again, and for code that knows no collection is in progress. A host that sweeps
// weak_short handles after the world restarts, to keep them out of the pause (palrt's Boehm
// binding, palrt/boehm/collector_binding.hpp), has them read through the gate too.
//
// Memory: slots live in 1 KiB blocks aligned to their size, 120 slots each, one kind per
// block, so a handle finds its block (kind, owner, bitmask) by masking its address; blocks
// are carved out of chunks of up to 64 (8.5 bytes per handle, and a few percent more for a
// growing table's last chunk; counters() reports what the table holds). A block's
// bitmask has a bit set for each slot handed out of the block; a sweep walks set bits. A
// thread allocates from a cache of free slots of its own (one per table and kind, up to
// 256) and releases into it, so the steady state takes no lock and writes no shared cache
// line. The fast paths are inline (at the end of this file): in a release build an
// allocate/release pair of a strong or weak handle is two plain stores, a load and a few
// compares, ~5 ns on the machines of docs/BENCHMARKS.md (`palrt-bench handles`); a dependent
// handle's release, and every release in a checked build, is an atomic exchange instead (out
// of line).
// A cache moves free slots 128 at a time: a full one returns a batch to its kind's depot and
// an empty one refills a batch from it, each batch moved with one compare-exchange on the
// shard of the CPU the thread runs on (internal/batch_depot.hpp), so threads whose working
// sets exceed their caches scale instead of taking turns; only when the depot has no batch
// does a refill take the kind's lock and claim slots from the blocks (or add a block), and
// only when it has no room does a return go back to the blocks. A free slot in a thread's
// cache or in the depot still has its bit set and holds a reserved "free" marker, which
// sweeps skip; the depot holds at most 8 to 16 batches per shard (one shard per online CPU
// id, rounded up to a power of two, decided on the kind's first return), which bounds what
// sweeps read beyond live handles. A thread whose cache has never overflowed refills from its
// own CPU's shard only (the batches on other shards are other threads' working sets, parked
// between bursts): it adds blocks instead, at most as many slots as the depot holds, which
// the threads reuse. A thread that exits returns its cache, and the batches it parked, to the
// blocks.
// Blocks are never returned while the table lives (the table's size is its high-water mark),
// which is what lets release be lock-free from any thread and sweeps run while other threads
// allocate and release.
//
// Thread safety: allocate, release, target, set_target, sweeps, for_each_strong,
// promote_dependents and counters may all be called concurrently from any threads, the
// finalizer's included. A sweep clears a slot only if it still holds the dead target it
// read (compare-exchange), so a concurrent set_target wins. A host must not allocate a new
// handle to an object it has found dead.
//
// After fork() (palrt/pal/fork.hpp): in a child, a table made before fork() is the parent's,
// and nothing takes its locks there (another thread may have held one at fork()). An
// allocate() that the calling thread's cache of free slots can serve works (the forking
// thread keeps its caches); one that needs a refill (from the depot or the blocks) throws
// pal::forked_child_error, whatever the depot holds, so the answer does not depend on what
// other threads of the parent had released.
// The rest takes no lock and works on the child's copy: target, set_target, the secondaries,
// kind, release, the sweeps, for_each_strong, promote_dependents, for_each_secondary_of,
// for_each_slot, the gate, counters. In a table made with index_dependents, a dependent
// handle's allocate() throws pal::forked_child_error there (linking it takes the index's lock)
// and its release() leaves the slot out of use (unlinking would). Destroying it works as
// anywhere.
//
// Misuse: releasing a handle twice, or releasing (or reading the kind of) a pointer that is
// not a handle of this table, prints one line to stderr naming the problem and aborts (a
// corrupted table cannot be reported any other way). Every build detects a release of a
// handle already released, a handle of another table, and a pointer into a live block that
// is not a slot: a read of the block header, usually cached, and of the slot the release
// writes anyway (no measurable cost). Checked builds (the caller's translation unit or palrt
// compiled without NDEBUG, or with ASan/TSan) release out of line with an atomic exchange, so
// two racing releases of one handle are caught too (~2x the cost of a pair), and palrt's own
// checked build also looks the block up in a lock-free set of the table's blocks before
// touching it, so that a wild pointer is reported instead of faulting (tens of nanoseconds
// per release). Otherwise a pointer into unmapped memory faults (SIGSEGV).
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "palrt/gc/detail/handle_fast_path.hpp"
#include "palrt/gc/detail/walk_callbacks.hpp"

namespace palrt::gc {

namespace internal {
class handle_table_access;
struct handle_table_state;
}  // namespace internal

enum class handle_kind : std::uint8_t { strong, weak_short, weak_long, dependent, pinned };
inline constexpr std::size_t handle_kind_count = 5;
// A collection's condemned generations, for handle_walk and age_handles(): every one. The
// generations below it (0..254) are the host's; palrt only compares them.
inline constexpr std::uint8_t all_generations = 255;
static_assert(handle_kind_count == detail::handle_kinds);
const char* handle_kind_name(handle_kind kind) noexcept;  // "strong", "weak-short", ...

// A GC handle: the address of one slot. Plain data, copied freely; owning one (releasing it
// exactly once) is the job of owned_handle and the typed wrappers (typed_handles.hpp). (Not
// to be confused with the waitable objects' Win32-style handles of the sync manager.)
class handle {
 public:
  handle() noexcept = default;
  explicit operator bool() const noexcept { return slot_ != nullptr; }
  friend bool operator==(handle, handle) noexcept = default;
  // The slot's address, for logging and as a map key.
  const void* address() const noexcept { return slot_; }

 private:
  friend class handle_table;
  friend class handle_slot;
  friend class internal::handle_table_access;
  explicit handle(std::atomic<void*>* slot) noexcept : slot_(slot) {}
  std::atomic<void*>* slot_ = nullptr;
};

// Thrown by allocate() when the table needs a new block and the allocation fails. Nothing
// is lost: every handle allocated before is intact and the table works on once memory is
// available again.
class handle_allocation_error : public std::bad_alloc {
 public:
  explicit handle_allocation_error(handle_kind kind);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

struct handle_counters {
  // Handles allocated and not released, per kind (index: handle_kind).
  std::array<std::size_t, handle_kind_count> handles{};
  std::size_t blocks = 0;  // blocks of all kinds
  // Memory the table holds: the chunks its blocks are carved from (up to 63 KiB of the last
  // one not carved yet), dependent blocks' secondaries (and index), and the depots; the
  // process's resident memory grows by as much (within a few percent). Not counted: each
  // thread's caches of free slots (8 KiB per thread and table it uses).
  std::size_t bytes = 0;
};

// One slot as a moving collector sees it (handle_table::for_each_slot): valid during the
// visit it is passed to. Its reads are of the slot as it is now: the handle may have been
// released since the walk reached it (a mutator the collector does not stop), and a read
// never yields palrt's free marker then, but null.
class handle_slot {
 public:
  gc::handle as_handle() const noexcept;
  // The target, or null (none, or released since the walk reached it).
  void* target() const noexcept {
    void* t = slot_->load(std::memory_order_acquire);
    return t == detail::free_slot_marker() ? nullptr : t;
  }
  // Replaces `from` with `to` if the slot still holds `from` (release): true if it did.
  bool relocate(void* from, void* to) const noexcept {
    return slot_->compare_exchange_strong(from, to, std::memory_order_release, std::memory_order_relaxed);
  }
  // A dependent handle's secondary, as handle_table::secondary() reads it: null for the
  // other kinds, and while the primary is null (a sweep cleared it, or the handle was
  // released since the walk reached it). And its relocation.
  void* secondary() const noexcept {
    if (!secondary_) return nullptr;
    // acquire, both: the primary's and the secondary's initialisation (allocate() publishes
    // them with its release store of the primary) before the host dereferences them.
    void* primary = slot_->load(std::memory_order_acquire);
    if (!primary || primary == detail::free_slot_marker()) return nullptr;
    return secondary_->load(std::memory_order_acquire);
  }
  bool relocate_secondary(void* from, void* to) const noexcept {
    return secondary_ &&
           secondary_->compare_exchange_strong(from, to, std::memory_order_release, std::memory_order_relaxed);
  }

 private:
  friend class handle_table;
  friend class handle_walk;
  handle_slot(std::atomic<void*>* slot, std::atomic<void*>* secondary) noexcept : slot_(slot), secondary_(secondary) {}
  std::atomic<void*>* slot_;
  std::atomic<void*>* secondary_;
};

struct handle_table_options {
  // Keep the dependent handles by primary, for for_each_secondary_of(): a lock and a link on
  // each dependent allocate and release (with the world running), 32 bytes per dependent
  // slot and a hash table of a pointer or two per dependent handle. A dependent handle's
  // primary is then set at allocate() only: set_target() and handle_slot::relocate() on a
  // dependent handle of an indexed table would leave it under its old primary (a moving
  // collector has a promote-again loop and uses promote_dependents() instead).
  bool index_dependents = false;
};

class handle_table {
 public:
  handle_table();
  explicit handle_table(handle_table_options options);
  handle_table(const handle_table&) = delete;
  handle_table& operator=(const handle_table&) = delete;
  // Every handle should have been released. If some were not, one line on stderr says how
  // many, and the blocks are left allocated (never freed under a handle still in use).
  ~handle_table();

  // A new handle of `kind` holding `target` (may be null); `secondary` is a dependent
  // handle's secondary and must be null for the other kinds. The target must not be an
  // object the host has found dead. Throws handle_allocation_error, and in a fork()ed child
  // pal::forked_child_error when it needs a refill (see above).
  [[nodiscard]] handle allocate(handle_kind kind, void* target, void* secondary = nullptr);

  // What the table was made with.
  handle_table_options options() const noexcept;

  // Returns the slot to the table and returns the target it held, read as gated_target()
  // reads it (the read gate, below): null if a sweep had cleared it, never a target that a
  // host's collector found dead and has not swept yet. So a release of a weak or dependent
  // handle while the gate is closed (between a host's mark and its sweeps; with palrt's Boehm
  // binding the world runs then) waits for the gate to open, as a gated read does, but on the
  // thread that closed it and in a fork()ed child (nobody opens it there); a strong or pinned
  // handle's never waits. For a dependent handle the result is exact, and it is how the owner
  // learns who owns the secondary: if it returns null, the sweep that cleared the primary reported
  // the secondary (sweep_weak); otherwise the caller does. For the other kinds it is the value
  // seen just before the release (a host that sweeps without closing the gate, palrt's
  // embedded collector, may clear it at the same time). Lock-free outside that window, from
  // any thread. Aborts on misuse (see above).
  void* release(handle h) noexcept;

  // The raw read of the target (acquire: the target's initialisation, published before it
  // was stored, is visible). Undefined on a released handle. Right for strong handles and for
  // code that knows no collection is between its mark and its sweeps. A weak or dependent
  // handle of a host whose sweeps come after the world restarts (palrt's Boehm binding, its
  // weak_short handles included) is read with gated_target() instead: a raw read there may
  // return an object the collector found dead and then reclaims (the read rule, above).
  static void* target(handle h) noexcept { return h.slot_->load(std::memory_order_acquire); }
  // Stores a new target (release). For a dependent handle, the primary.
  // Makes its block young ("Generations", above) before and after the store.
  static void set_target(handle h, void* target) noexcept {
    if (target) detail::mark_young(h.slot_);
    h.slot_->store(target, std::memory_order_release);
    if (target) detail::mark_young(h.slot_);
  }
  // A dependent handle's secondary: null for the other kinds, and null while the primary is
  // null, so null once a sweep cleared the primary (sweep_weak reported the secondary then:
  // it is the host's to reclaim, and the slot keeps no copy a reader could take). The raw
  // read, as target() is: with the world running during a host's sweeps, gated_secondary().
  void* secondary(handle h) const noexcept;
  // Replaces a dependent handle's secondary. Not atomic with respect to a sweep that clears
  // the primary at the same time (the sweep reports the secondary it read): a host changes
  // secondaries only while its sweeps are not running.
  void set_secondary(handle h, void* secondary) const noexcept;
  // The handle's kind, from its block. Aborts on a pointer that is no handle of this table.
  handle_kind kind(handle h) const noexcept;

  // --- The host GC's interface (order, and what may run with the world stopped: see the
  // top of this file) ---

  // Clears every handle of the weak or dependent kind `kind` whose target is not alive:
  // calls is_alive(target) for each non-null target, and for each one it clears, calls
  // on_cleared(target, secondary) (secondary is null except for dependent handles; the
  // embedded collector drops its reference to it there). Returns the number cleared. Runs
  // while other threads allocate and release; a slot that changed since it was read is left
  // alone. Throws std::invalid_argument for the strong and pinned kinds.
  template <class IsAlive, class OnCleared>
  std::size_t sweep_weak(handle_kind kind, IsAlive&& is_alive, OnCleared&& on_cleared) {
    return sweep(kind, detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>,
                 detail::erase(on_cleared), &detail::call_cleared<std::remove_reference_t<OnCleared>>);
  }
  template <class IsAlive>
  std::size_t sweep_weak(handle_kind kind, IsAlive&& is_alive) {
    return sweep(kind, detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>, nullptr,
                 nullptr);
  }
  // The same with the liveness test called once per batch of up to sweep_batch targets:
  // is_alive(std::span<void* const> targets, std::span<bool> alive) sets alive[i] for each.
  // For a host whose test is out of line (a call into the collector per object would
  // dominate the sweep; a batch lets it prefetch, or look its mark bits up in one go).
  static constexpr std::size_t sweep_batch = 256;
  template <class IsAliveBatch, class OnCleared>
  std::size_t sweep_weak_batched(handle_kind kind, IsAliveBatch&& is_alive, OnCleared&& on_cleared) {
    return sweep_batched(kind, detail::erase(is_alive), &detail::call_batch<std::remove_reference_t<IsAliveBatch>>,
                         detail::erase(on_cleared), &detail::call_cleared<std::remove_reference_t<OnCleared>>);
  }
  template <class IsAliveBatch>
  std::size_t sweep_weak_batched(handle_kind kind, IsAliveBatch&& is_alive) {
    return sweep_batched(kind, detail::erase(is_alive), &detail::call_batch<std::remove_reference_t<IsAliveBatch>>,
                         nullptr, nullptr);
  }
  // Calls visit(target) for every non-null target of a strong or pinned handle: the roots.
  template <class Visit>
  void for_each_strong(Visit&& visit) const {
    const detail::visit_fn fn = &detail::call_visit<std::remove_reference_t<Visit>>;
    visit_targets(handle_kind::strong, detail::erase(visit), fn);
    visit_targets(handle_kind::pinned, detail::erase(visit), fn);
  }
  // Calls visit(target) for every non-null target of a pinned handle: what a moving collector
  // must not move (called before it evacuates; they are roots too, for_each_strong()).
  template <class Visit>
  void for_each_pinned(Visit&& visit) const {
    visit_targets(handle_kind::pinned, detail::erase(visit), &detail::call_visit<std::remove_reference_t<Visit>>);
  }
  // For every dependent handle whose primary is alive and whose secondary is not, calls
  // mark(secondary). Returns how many it marked; the host repeats until it returns 0.
  template <class IsAlive, class Mark>
  std::size_t promote_dependents(IsAlive&& is_alive, Mark&& mark) const {
    return promote(detail::erase(is_alive), &detail::call_predicate<std::remove_reference_t<IsAlive>>,
                   detail::erase(mark), &detail::call_visit<std::remove_reference_t<Mark>>);
  }

  // For a collector's per-object mark procedure (table made with index_dependents; aborts
  // otherwise): calls visit(secondary) for the non-null secondary of every dependent handle
  // whose primary is `primary`, and returns how many. No lock, no allocation: with the world
  // stopped (parallel markers at once included), or with the world running while the
  // primary is unreachable to mutators (Boehm's finalization marking) and other threads
  // allocate and release dependent handles. A traversal that raced a release reads its chain
  // again, so visit may see a secondary twice (marking is idempotent); one linked the
  // moment it runs may be missed (its secondary is in the allocating caller's hands).
  template <class Visit>
  std::size_t for_each_secondary_of(const void* primary, Visit&& visit) const noexcept {
    return secondaries_of(primary, detail::erase(visit), &detail::call_visit<std::remove_reference_t<Visit>>);
  }

  // For a moving collector: calls visit(slot) with a handle_slot for every handle of `kind`
  // (each allocated and not released when the walk reaches it), through which the collector
  // reads the target and, having moved it, relocates it (compare-and-swap: a slot released
  // or retargeted meanwhile is left alone). With the world stopped, or under the host's own
  // rule that keeps mutators off the slots it moves.
  template <class Visit>
  void for_each_slot(handle_kind kind, Visit&& visit) const {
    visit_slots(kind, detail::erase(visit), &detail::call_slot<std::remove_reference_t<Visit>>);
  }

  // The read rule for weak_long and dependent handles while a collection is in progress
  // (the gate). Between the end of a host's mark and its weak_long/dependent sweeps, a
  // target the collector found dead is still in its slot, and a mutator that reads it then
  // holds an object about to be reclaimed. The host closes the gate when its mark ends (with
  // the world stopped, before any mutator runs again) and opens it after those sweeps; a
  // gated read waits while the gate is closed, and a read that overlapped a close reads again.
  // The thread that closed the gate (the collector) reads through it. Outside collections a
  // gated read is two loads of a read-mostly line beside the slot's. target() stays the raw
  // read: right for strong handles, for code that knows no collection runs, and for
  // weak_short handles only where the host sweeps them before the world runs again. palrt's
  // Boehm binding sweeps weak_short handles after the world restarts (out of the pause), so
  // there a weak_short handle is read through the gate too. release() reads through it.
  void close_tracking_reads() noexcept;
  void open_tracking_reads() noexcept;
  void* gated_target(handle h) const noexcept;
  // A dependent handle's secondary under the same rule (checked as secondary() is), and null
  // once its primary was cleared: the secondary of a dead primary is the host's to reclaim
  // (sweep_weak reported it), not a mutator's to read.
  void* gated_secondary(handle h) const noexcept;

  // One collector sweeps a table. Two would race: each clears the handles of the objects it
  // finds dead, by its own rules, while the other walks the same blocks. A collector claims
  // its table for as long as it sweeps it (palrt's embedded collector does so in its
  // constructor and gives it up in its destructor; a host GC may do the same). Throws
  // std::logic_error if the table is claimed already (std::invalid_argument, a logic_error,
  // for a null `owner`). `owner` identifies the claimant (any address); a
  // release_collector() by anyone but the claimant does nothing.
  void claim_for_collector(const void* owner);
  void release_collector(const void* owner) noexcept;

  // Ages the blocks after a collection that condemned generations 0..condemned, with the
  // world still stopped (see "Generations" at the top of this file): every block whose age
  // is at most `condemned` takes age max(age, min(survivors, condemned + 1)), where
  // `survivors` is the lowest generation the collection left its survivors in. Called once
  // per collection, by one thread, after the collection's last walk. Reads one byte per block
  // of every kind; takes no lock, allocates nothing.
  void age_handles(std::uint8_t condemned, std::uint8_t survivors) noexcept;

  // A snapshot, not atomic across kinds: walks every block (microseconds per thousand
  // blocks); for reports, not for a fast path.
  handle_counters counters() const;

 private:
  friend class internal::handle_table_access;
  friend class handle_walk;
  friend class dependent_promotion;
  using predicate_fn = detail::predicate_fn;
  using visit_fn = detail::visit_fn;
  using cleared_fn = detail::cleared_fn;
  using batch_fn = detail::batch_fn;
  using slot_fn = detail::slot_fn;
  std::size_t sweep(handle_kind kind, void* is_alive, predicate_fn, void* on_cleared, cleared_fn);
  std::size_t sweep_batched(handle_kind kind, void* is_alive, batch_fn, void* on_cleared, cleared_fn);
  void visit_slots(handle_kind kind, void* visit, slot_fn) const;
  // `slot` under the gate; with `primary`, null unless the primary holds a target then too.
  [[gnu::noinline]] void* gated_read_slow(const std::atomic<void*>& slot,
                                          const std::atomic<void*>* primary = nullptr) const noexcept;
  void visit_targets(handle_kind kind, void* visit, visit_fn) const;
  std::size_t promote(void* is_alive, predicate_fn, void* mark, visit_fn) const;
  std::size_t secondaries_of(const void* primary, void* visit, visit_fn) const noexcept;

  detail::handle_block* block_of(handle h, const char* operation) const noexcept;
  // What the inline fast paths hand over: everything but a slot from or to this thread's
  // cache of the table it used last, in a release build (handle_table.cpp).
  handle allocate_slow(handle_kind kind, void* target, void* secondary);
  void* release_slow(handle h) noexcept;

  const std::uint64_t serial_;  // unique per table for the life of the process
  // The read gate: even while open, odd while closed (close and open each add one).
  mutable std::atomic<std::uint32_t> gate_{0};
  mutable std::atomic<std::uint32_t> gate_waiters_{0};
  std::atomic<const void*> gate_closer_{nullptr};  // the closing thread's marker
  std::unique_ptr<internal::handle_table_state> state_;
};

// --- The fast paths, inline (the liburcu shape: a few instructions here, the rest out of
// line in handle_table.cpp). Checked builds of the caller (NDEBUG not defined, or ASan/TSan)
// always take the out-of-line path with every check. ---

#ifndef PALRT_HANDLE_INLINE_FAST_PATH  // palrt's tests set it, to run it under the sanitizers
#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PALRT_HANDLE_INLINE_FAST_PATH 0
#else
#define PALRT_HANDLE_INLINE_FAST_PATH 1
#endif
#endif

inline handle handle_slot::as_handle() const noexcept { return handle(slot_); }

inline void* handle_table::gated_target(handle h) const noexcept {
  // A seqlock reader: the gate open before and unchanged after the slot's read means the read
  // happened outside any window between a mark and the sweeps that follow it.
  const std::uint32_t g = gate_.load(std::memory_order_acquire);
  if (!(g & 1)) [[likely]] {
    void* t = h.slot_->load(std::memory_order_acquire);
    if (gate_.load(std::memory_order_relaxed) == g) [[likely]]
      return t;
  }
  return gated_read_slow(*h.slot_);
}

inline handle handle_table::allocate(handle_kind kind, void* target, void* secondary) {
  if (PALRT_HANDLE_INLINE_FAST_PATH && (kind < handle_kind::dependent || kind == handle_kind::pinned) && !secondary) {
    const detail::thread_cache_hint hint = detail::current_thread_cache;
    if (hint.serial == serial_) [[likely]] {
      detail::handle_cache& cache = hint.caches->kinds[static_cast<std::size_t>(kind)];
      if (cache.count > 0) [[likely]] {
        std::atomic<void*>* slot = cache.slots[--cache.count];
        // The block young before and after the store ("Generations", above).
        if (target) detail::mark_young(slot);
        // release: publishes the target's initialisation to sweeps and readers.
        slot->store(target, std::memory_order_release);
        if (target) detail::mark_young(slot);
        return handle(slot);
      }
    }
  }
  return allocate_slow(kind, target, secondary);
}

inline void* handle_table::release(handle h) noexcept {
  if (PALRT_HANDLE_INLINE_FAST_PATH) {
    const auto address = reinterpret_cast<std::uintptr_t>(h.slot_);
    const detail::handle_block* block = detail::handle_block::of(h.slot_);
    // The release build's misuse checks (see the top of this file): anything unusual, a
    // dependent handle included, goes to release_slow(), which reports it.
    if (h.slot_ && address % alignof(std::atomic<void*>) == 0 &&
        address - reinterpret_cast<std::uintptr_t>(block) >= detail::handle_block_header_bytes &&
        block->magic == detail::handle_block_magic && block->owner == this && !block->secondaries) [[likely]] {
      const detail::thread_cache_hint hint = detail::current_thread_cache;
      if (hint.serial == serial_) [[likely]] {
        detail::handle_cache& cache = hint.caches->kinds[static_cast<std::size_t>(block->kind)];
        void* const marker = detail::free_slot_marker();
        // The target is read as gated_target() reads it (the gate open before the read and
        // unchanged after it; anything else goes out of line, which waits): a release never
        // returns a target found dead by a mark whose sweeps have not run. acquire (gate): the
        // sweeps before the gate opened are visible (open_tracking_reads' store). acquire
        // (slot): the caller may act on the returned target, and the gate's second look,
        // relaxed, cannot move before it. `g` is the gate's value rounded down to even: a
        // gate closed (odd) at the first look, or moved since, reads as something else at
        // the second (it only counts up), so one compare tests both. A fraction of a
        // nanosecond per pair (docs/BENCHMARKS.md).
        const std::uint32_t g = gate_.load(std::memory_order_acquire) & ~std::uint32_t{1};
        void* const old = h.slot_->load(std::memory_order_acquire);
        if (old != marker && cache.count < detail::handle_cache::capacity && gate_.load(std::memory_order_relaxed) == g)
            [[likely]] {
          // A load and a store, no read-modify-write: see release_slow() for why that is
          // enough for these kinds. release: the caller's uses of the slot come before reuse.
          h.slot_->store(marker, std::memory_order_release);
          cache.slots[cache.count++] = h.slot_;
          return old;
        }
      }
    }
  }
  return release_slow(h);
}

}  // namespace palrt::gc

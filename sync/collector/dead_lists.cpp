// SPDX-License-Identifier: MIT
// The collector's dead lists: one per thread (internal/dead_lists.hpp), taken all together by
// collect().
//
// Per thread, not per CPU. Per-CPU lists (a CPU number from rseq or sched_getcpu() at each
// death) would need no slot and no exit hook, but a thread that migrates between two deaths
// puts them on two lists, so even one thread's deaths would come out of order unless every
// object carried a stamp, and a thread migrated onto a busy CPU shares its list with the
// thread running there. A thread's own list keeps its deaths in order for nothing, is written
// by that thread alone, and costs one slot claim and one exit hook per thread, not per death.
//
// Slots (process-wide). A thread claims the lowest free slot at its first make_object or
// death (S': fetch_or of its bit, acquire) and gives it back when it exits (S: fetch_and,
// release), from a thread_local's destructor, after which its current_thread_slot says
// slot_none. A later thread may claim the slot again.
//
// Records (per collector). Slot s has record s of each collector: chunk s / 64, allocated by
// the first thread of its range that uses the collector and published once (C: compare-
// exchange of a null cell, release; C': every reader's load, acquire). Chunks are freed
// with the collector's state.
//
// Push, by the dying thread onto its own record (onto the shared record without a slot):
//   D1: h = head (relaxed); o->next_ = h;
//   D2: compare-exchange head h -> o (release); on failure, back to D1 with the head read.
// Take, by collect() under collect_lock, in two steps:
//   T1: exchange the shared record's head with null (acquire);
//   T2: for each published chunk (C'), each record: if its head is not null (relaxed), exchange
//       it with null (acquire).
//   An automatic collection of a thread's own dead (collector.cpp) takes only that thread's
//   record, as T2 does: a prefix of its deaths, the rest for a later take, and marks the
//   record as collected by its owner (relaxed: a hint). Every 64th is a sweep
//   (take_unattended): if the shared record's head reads null, it takes its own record and
//   every record not so marked, as T2 does, and afterwards clears the marks; a record it skips
//   is its owner's to take, or the next sweep's if its owner does not collect again. A sweep
//   that finds the shared list not empty takes everything (T1, T2) instead: skipping a marked
//   record of a thread that has since exited while taking the shared list, where that thread's
//   deaths during its exit went, would hand those on before its earlier deaths.
//   The order collect() handles them in: the records in slot order, each record's objects in
//   the order they died, then the shared list's, in the order they were pushed. (take_all()
//   hands the lists over in the reverse of that, latest death first, and collect() prepends.)
//
// Why nothing is lost or taken twice:
//   - A take between a pusher's D1 and D2 changes the head (h -> null), so D2 fails and the
//     pusher links o to what is there now: o never joins a list that was taken. If h was null,
//     the head is null again after the take and D2 rightly succeeds. ABA (the head back to h
//     between D1 and D2, possible on the shared record: h taken, freed, its memory reused by an
//     object pushed again) is harmless: a push only needs o->next_ to equal the head it
//     replaces, and it does; nothing ever pops a single object.
//   - Each list is taken by one exchange, whole, by one collect() at a time.
//   - D2 (release) and the take's exchange (acquire): collect() sees the object as its last
//     dropper left it, and the objects pushed before, whose D2s head the release sequence the
//     later D2s continue (each is a read-modify-write).
//   - T2 skips a record whose head reads null. A push that happened before collect() began is
//     not skipped: coherence makes the load read it or a later value, and only a take makes
//     the head null. Skipping saves writing lines other threads own.
//
// A thread that exits with objects on its record: they stay there, and every take walks every
// record of every published chunk whether its slot is held or not, so the next collect() of
// each collector takes them. Its slot's next owner pushes onto the same record: S (release)
// after the old owner's last push, S' (acquire) before the new owner's first, so the record
// keeps one pusher at a time (count_created() relies on it) and keeps the old owner's objects
// ahead of the new owner's.
// Its deaths after S (another thread_local's destructor dropping the last reference) go to the
// shared record, after every death of it on its own record. T1 before T2 makes those come out
// no earlier: if T1 took such an object, the thread's earlier pushes happened before T1 (its
// D2s on its record precede, in its program order, the D2 on the shared record that T1 read),
// and T2, after T1 on the collecting thread, reads them or later values. So an object it
// dropped before it exited is never taken by a later collection than one it dropped while
// exiting, and within one collection it comes first (the shared list is handled last).
//
// The order (collector.hpp states it to hosts): objects that died on one thread are handed on
// (queued for finalization, retired) in the order they died, within a collection and across
// collections (a later collection's queue entries come after the earlier's); objects that died
// on different threads in no promised order (the records are taken in slot order). A
// thread's slot chunk that cannot be allocated (out of memory) sends that death to the shared
// record, which may then come out after the thread's later deaths. Resurrected objects that
// died again while their finalize() still ran are put back on the shared record by
// collect() (collector.cpp), to be taken up next time.
//
// A collector destroyed while threads live: a thread holds its slot number and no pointer into
// any collector, so nothing refers to the chunks when the state that owns them goes. The state
// goes only when no object of it exists (collector.hpp: a collector destroyed with objects
// alive keeps its state), so no push or count can come after. Several collectors: each has
// its records; one slot indexes them all.
//
// fork(): the child has one thread, the forking one. The parent's other threads never run
// their exit hook there, so their slots would stay held: the child handler below frees every
// slot but the forking thread's. Their records in the parent's collectors keep what they hold
// (those collectors never collect in a child: collector.hpp), and a child's thread that claims
// such a slot pushes onto them as the parent's thread would have; collectors the child makes
// start empty. A push or claim another thread of the parent was in the middle of is simply
// never finished: a push in the child's copy either happened or not, and nothing of the
// parent's collectors is freed in the child.
#include "palrt/gc/internal/dead_lists.hpp"

#include <pthread.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "palrt/gc/internal/collector_state.hpp"

namespace palrt::gc::internal {

constinit thread_local std::uint32_t current_thread_slot = slot_unclaimed;

namespace {

constexpr std::uint32_t slot_words = max_thread_slots / 64;
// Bit s: slot s is held by a live thread.
std::array<std::atomic<std::uint64_t>, slot_words> held_slots{};

// This thread's exit hook has run: a death later in its exit uses the shared record rather
// than registering a hook that would never run.
constinit thread_local bool slot_given_back = false;

void give_back(std::uint32_t slot) noexcept {
  // S, release: this thread's pushes onto its records happen before those of the slot's next
  // owner (its S' reads this or a later value of the word).
  held_slots[slot / 64].fetch_and(~(std::uint64_t{1} << (slot % 64)), std::memory_order_release);
}

struct slot_owner {
  ~slot_owner() {
    slot_given_back = true;
    const std::uint32_t slot = current_thread_slot;
    current_thread_slot = slot_none;
    if (slot < max_thread_slots) give_back(slot);
  }
};

// fork() child: only the forking thread is left; the others' slots are free again. relaxed:
// this runs on the child's only thread, before it can start another (thread creation
// publishes these stores to the new thread).
void free_other_threads_slots() noexcept {
  for (auto& word : held_slots) word.store(0, std::memory_order_relaxed);
  const std::uint32_t mine = current_thread_slot;
  if (mine < max_thread_slots) held_slots[mine / 64].store(std::uint64_t{1} << (mine % 64), std::memory_order_relaxed);
}

// Before the first slot is claimed.
void free_slots_in_fork_child() noexcept {
  static const bool installed = [] {
    if (int err = ::pthread_atfork(nullptr, nullptr, &free_other_threads_slots)) {
      std::fprintf(stderr, "palrt: dead lists: pthread_atfork: %s\n", std::strerror(err));
      std::abort();  // a fork()ed child would lose its slots to threads it does not have
    }
    return true;
  }();
  (void)installed;
}

// Runs a test's one-shot hook, if one is set.
void run_hook(std::atomic<const dead_lists::step_hook*>& hook) noexcept {
  // relaxed: tests set hooks before the push or take they aim at, and synchronise with it
  // themselves; the exchange below claims the hook so that it runs once.
  if (hook.load(std::memory_order_relaxed) == nullptr) [[likely]]
    return;
  // acquire: the hook's fields as the test wrote them.
  if (const dead_lists::step_hook* h = hook.exchange(nullptr, std::memory_order_acquire)) h->call(h->context);
}

}  // namespace

std::uint32_t claim_thread_slot() noexcept {
  if (slot_given_back) return current_thread_slot = slot_none;
  free_slots_in_fork_child();
  static thread_local slot_owner owner;  // the exit hook, registered before the slot is held
  (void)owner;
  for (std::uint32_t w = 0; w < slot_words; ++w) {
    // relaxed: a hint; the fetch_or below decides.
    std::uint64_t bits = held_slots[w].load(std::memory_order_relaxed);
    while (bits != ~std::uint64_t{0}) {
      const auto bit = static_cast<std::uint32_t>(std::countr_one(bits));
      const std::uint64_t mask = std::uint64_t{1} << bit;
      // S', acquire: pairs with the previous owner's S (see give_back).
      bits = held_slots[w].fetch_or(mask, std::memory_order_acquire);
      if (!(bits & mask)) return current_thread_slot = w * 64 + bit;
    }
  }
  return current_thread_slot = slot_none;  // 4096 threads hold one: the shared record, for life
}

std::size_t thread_slots_in_use() noexcept {
  std::size_t n = 0;
  for (const auto& word : held_slots)
    n += static_cast<std::size_t>(std::popcount(word.load(std::memory_order_relaxed)));
  return n;
}

dead_lists::~dead_lists() {
  for (auto& cell : chunks_) std::unique_ptr<dead_list_chunk> owned(cell.load(std::memory_order_relaxed));
}

dead_list_record& dead_lists::mine_slow() noexcept {
  std::uint32_t slot = current_thread_slot;
  if (slot == slot_unclaimed) slot = claim_thread_slot();
  if (slot >= max_thread_slots) return shared_;
  std::atomic<dead_list_chunk*>& cell = chunks_[slot / records_per_chunk];
  dead_list_chunk* chunk = cell.load(std::memory_order_acquire);  // C': see mine()
  if (!chunk) {
    std::unique_ptr<dead_list_chunk> fresh(new (std::nothrow) dead_list_chunk);
    if (!fresh) return shared_;  // out of memory: nothing is lost, the order may be (above)
    // C, release: the chunk's records are constructed before any thread reads the pointer.
    // acquire on failure: the same for the chunk another thread published first.
    if (cell.compare_exchange_strong(chunk, fresh.get(), std::memory_order_release, std::memory_order_acquire))
      chunk = fresh.release();
  }
  return chunk->records[slot % records_per_chunk];
}

void dead_lists::push(dead_list_record& r, object* o) noexcept {
  object* head = r.head.load(std::memory_order_relaxed);  // D1 (relaxed: D2 checks it)
  for (;;) {
    collector_state::link(o, head);
    run_hook(between_push_steps);
    // D2, release: pairs with the take's acquire exchange (T1, T2).
    if (r.head.compare_exchange_weak(head, o, std::memory_order_release, std::memory_order_relaxed)) return;
  }
}

void dead_lists::push_shared(object* first, object* last) noexcept { collector_state::push(shared_.head, first, last); }

void dead_lists::run_take_hook() noexcept { run_hook(between_take_steps); }

bool dead_lists::empty() const noexcept {
  // acquire: as a take; the caller (the collector's destructor) may take what it sees.
  if (shared_.head.load(std::memory_order_acquire)) return false;
  for (const auto& cell : chunks_)
    if (const dead_list_chunk* chunk = cell.load(std::memory_order_acquire))
      for (const dead_list_record& r : chunk->records)
        if (r.head.load(std::memory_order_acquire)) return false;
  return true;
}

std::uint64_t dead_lists::created() const noexcept {
  // relaxed: counters.
  std::uint64_t n = shared_.created.load(std::memory_order_relaxed);
  for (const auto& cell : chunks_)
    if (const dead_list_chunk* chunk = cell.load(std::memory_order_acquire))  // C'
      for (const dead_list_record& r : chunk->records) n += r.created.load(std::memory_order_relaxed);
  return n;
}

dead_list_record* dead_lists::record_of_slot(std::uint32_t slot) const noexcept {
  if (slot >= max_thread_slots) return nullptr;
  dead_list_chunk* chunk = chunks_[slot / records_per_chunk].load(std::memory_order_acquire);  // C'
  return chunk ? &chunk->records[slot % records_per_chunk] : nullptr;
}

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// A collector's dead lists: one per thread, so that objects dying on different threads touch
// no shared cache line. dead_lists.cpp states the protocol (who pushes, who takes, thread
// exit, fork(), the order objects come out in).
//
// Each thread holds a small process-wide slot number for its life (claimed at its first
// object made or dropped, given back when it exits, then reused); each collector keeps one
// record per slot: the dead list its thread pushes onto and the count of objects that thread
// made. A thread holds no pointer into any collector, so collectors may come and go while
// threads live, and threads may come and go while a collector lives.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "palrt/gc/object.hpp"

namespace palrt::gc::internal {

// Records per chunk (8 KiB, allocated when the first thread of its slot range uses the
// collector) and chunks per collector: 4096 threads alive at once get a list of their own; a
// thread beyond that uses the collector's shared list for its life.
inline constexpr std::uint32_t records_per_chunk = 64;
inline constexpr std::uint32_t max_chunks = 64;
inline constexpr std::uint32_t max_thread_slots = records_per_chunk * max_chunks;
// current_thread_slot before the thread's first claim (or after fork(), see dead_lists.cpp)
inline constexpr std::uint32_t slot_unclaimed = 0xffffffffu;
// a thread with no slot (4096 others hold theirs, or its exit hook ran): the shared list
inline constexpr std::uint32_t slot_none = 0xfffffffeu;

// Records are 128 bytes apart, not 64: x86's spatial prefetchers pull lines in pairs (Intel
// since Sandy Bridge; AMD's L2 prefetchers likewise), so two threads' records on the two
// halves of one pair would share traffic as if they shared a line (crossbeam's CachePadded
// and folly's hardware_destructive_interference_size use 128 on x86-64 for the same reason).
inline constexpr std::size_t record_alignment = 128;

// One thread's (a slot's) part of one collector. Lines of its own: its owner writes it on
// every make_object and every death; a collection reads it once.
struct alignas(record_alignment) dead_list_record {
  // Dead objects, latest first, linked through object::next_. Pushed by the slot's owner
  // (any thread for the shared record), taken whole by collect().
  std::atomic<object*> head{nullptr};
  // Objects made by the slot's owners (relaxed: a counter, summed by counters()).
  std::atomic<std::uint64_t> created{0};
  // The count at which its owner next collects (collector_options::collect_every); 0 until
  // the first. Only the slot's owner uses it (not on the shared record).
  std::uint64_t next_collection = 0;
  // Automatic collections its owners ran (collect_now); only they use it.
  std::uint32_t automatic_collections = 0;
  // Set by its owner's automatic collection of its own list, cleared after another thread's
  // periodic sweep (take_unattended, clear_owner_marks), which takes only the lists nobody
  // took since the last. relaxed: a hint; a stale value only moves a list to a later take.
  std::atomic<bool> collected_by_owner{false};
};

struct dead_list_chunk {
  std::array<dead_list_record, records_per_chunk> records;
};

// The calling thread's slot (slot_unclaimed, slot_none or < max_thread_slots). Written only
// by its thread (and by the fork() child's handler, on the child's only thread).
extern constinit thread_local std::uint32_t current_thread_slot;
// Claims a slot for the calling thread: the lowest free one; slot_none if none is free or the
// thread is exiting.
std::uint32_t claim_thread_slot() noexcept;
// Slots held by live threads (a snapshot, for tests).
std::size_t thread_slots_in_use() noexcept;

class dead_lists {
 public:
  dead_lists() = default;
  ~dead_lists();  // frees the chunks: nobody may push any more (collector_state's owner sees to it)
  dead_lists(const dead_lists&) = delete;
  dead_lists& operator=(const dead_lists&) = delete;

  // The calling thread's record: its slot's, or the shared one (no slot, or no memory for
  // the slot's chunk). Never fails.
  dead_list_record& mine() noexcept {
    const std::uint32_t s = current_thread_slot;
    if (s < max_thread_slots) [[likely]] {
      // acquire: pairs with the release that published the chunk (mine_slow): its records
      // are seen constructed.
      if (dead_list_chunk* c = chunks_[s / records_per_chunk].load(std::memory_order_acquire)) [[likely]]
        return c->records[s % records_per_chunk];
    }
    return mine_slow();
  }

  // Counts an object made by the calling thread; true when the thread's count reaches a
  // multiple of `collect_every` (0: never), the time for it to collect.
  bool count_created(dead_list_record& r, std::uint64_t collect_every) noexcept {
    if (&r != &shared_) [[likely]] {
      // One writer, the slot's owner (a later owner synchronised with the last through the
      // slot's claim: dead_lists.cpp), so a load and a store, no read-modify-write.
      // relaxed: a counter.
      const std::uint64_t n = r.created.load(std::memory_order_relaxed) + 1;
      r.created.store(n, std::memory_order_relaxed);
      if (collect_every == 0) return false;
      // A comparison, not n % collect_every: a division costs as much as the rest of the count.
      if (r.next_collection == 0) r.next_collection = (n + collect_every - 1) / collect_every * collect_every;
      if (n < r.next_collection) return false;
      r.next_collection = n + collect_every;
      return true;
    }
    const std::uint64_t n = r.created.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: a counter
    return collect_every != 0 && n % collect_every == 0;
  }

  // Pushes a dead object (D in dead_lists.cpp).
  void push(dead_list_record& r, object* o) noexcept;

  // Takes every list (T1, T2 in dead_lists.cpp) and calls visit(head) for each list taken,
  // a list being linked through object::next_, latest death first: the shared list first,
  // then the threads' lists from the highest slot down. So the reverse of the visits' order
  // is the order dead_lists.cpp promises (thread by thread from the lowest slot, each in the
  // order its objects died, the shared list last): collect() builds its chains by
  // prepending, and no pass is spent reversing the lists. One caller at a time
  // (collect_lock).
  template <class Visit>
  void take_all(Visit&& visit) noexcept {
    // T1, acquire: pairs with the pushers' D2.
    if (object* list = shared_.head.exchange(nullptr, std::memory_order_acquire)) visit(list);
    run_take_hook();
    for_each_record_from_highest([&](dead_list_record& r) { take_one(r, visit); });  // T2
  }
  // Takes one record's list (an automatic collection of its own thread's dead:
  // collector.cpp), as T2 does; visit(head) as for take_all().
  template <class Visit>
  void take_one(dead_list_record& r, Visit&& visit) noexcept {
    // relaxed: a filter; acquire: pairs with the pushers' D2.
    if (r.head.load(std::memory_order_relaxed))
      if (object* list = r.head.exchange(nullptr, std::memory_order_acquire)) visit(list);
  }
  // Takes `mine`'s list and those of the records whose owner did not take its own since the
  // last such take (threads that never allocate, exited threads), as T2 does, in take_all()'s
  // order; the others are their owners' to take. visit(head) as for take_all(). Not the shared
  // list: a caller that finds it not empty (shared_empty()) takes everything instead, so that
  // an exiting thread's deaths there never come out before its earlier ones (dead_lists.cpp).
  // One caller at a time (collect_lock).
  template <class Visit>
  void take_unattended(const dead_list_record& mine, Visit&& visit) noexcept {
    for_each_record_from_highest([&](dead_list_record& r) {
      if (&r == &mine || !r.collected_by_owner.load(std::memory_order_relaxed)) take_one(r, visit);
    });
  }
  // After a take_unattended(): the lists it left are their owners' until they next collect.
  void clear_owner_marks() noexcept {
    for_each_record_from_highest([](dead_list_record& r) {
      if (r.collected_by_owner.load(std::memory_order_relaxed))
        r.collected_by_owner.store(false, std::memory_order_relaxed);
    });
  }
  bool shared_empty() const noexcept { return shared_.head.load(std::memory_order_relaxed) == nullptr; }
  // A push onto the shared list from collect() (objects to take up again next time).
  void push_shared(object* first, object* last) noexcept;

  // Nothing on any list (a snapshot: for the collector's destructor, once mutators stopped).
  bool empty() const noexcept;
  // Objects made, over every record (relaxed snapshots).
  std::uint64_t created() const noexcept;

  // --- for tests (collector_access) ---
  // The record of `slot` if its chunk exists, else null; the shared record.
  dead_list_record* record_of_slot(std::uint32_t slot) const noexcept;
  dead_list_record& shared() noexcept { return shared_; }
  // A test's hook: push() calls it between its two steps (D1 and D2 in dead_lists.cpp),
  // take_all() between its two (T1 and T2); null normally. Each runs once, then is cleared.
  struct step_hook {
    void (*call)(void* context);
    void* context;
  };
  std::atomic<const step_hook*> between_push_steps{nullptr};
  std::atomic<const step_hook*> between_take_steps{nullptr};

 private:
  // Every record of a published chunk, from the highest slot down (the takes' order).
  template <class F>
  void for_each_record_from_highest(F&& f) noexcept {
    for (std::size_t c = max_chunks; c-- > 0;) {
      dead_list_chunk* chunk = chunks_[c].load(std::memory_order_acquire);  // C'
      if (!chunk) continue;
      for (std::size_t i = records_per_chunk; i-- > 0;) f(chunk->records[i]);
    }
  }
  dead_list_record& mine_slow() noexcept;
  void run_take_hook() noexcept;

  // Read-mostly: written once per chunk; every thread's fast path reads it.
  std::array<std::atomic<dead_list_chunk*>, max_chunks> chunks_{};
  // Written by many threads when used: a line of its own (the record is aligned).
  dead_list_record shared_;
};

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// The host mode's identity map (host_identity_cache.hpp): the bucket tables both modes share
// (bucket_tables.hpp), with the host's wrapper as each entry's value and tombstones reused.
//
// host_lock. The host's lock serialises every call: plain loads and stores, no sequence, a
// replaced table freed at once, and no tombstones: an erase moves the rest of its cluster
// back over the hole (remove_shifting), a sweep compacts each table it removed from, and a
// table an erase leaves 1/8 full shrinks. So a lookup that misses (churn with nothing held)
// probes to the first empty slot of a short cluster, and dropping every wrapper gives the
// memory back. Nothing below applies.
//
// grace_period: readers (detail::host_find_concurrent(), inline) and writers.
// - Writers of a bucket take its lock. A writer that changes a published table's entries
//   does so inside the table's sequence window: seq +1 (odd), a release fence, the stores,
//   seq +1 (even, release). A reader reads seq (S1, acquire), probes, fences (acquire) and
//   reads seq again (S2): equal and even means no writer touched the table in between, so
//   the key and value it read belong together. This is what makes reusing a tombstone safe:
//   without it a reader could pair an identity with the value a later insert wrote into the
//   same slot for another one.
// - A replaced table's sequence is made odd for good after its replacement is published:
//   a reader that probed it retries on the new table (or asks under the lock). The table
//   itself is freed after a grace period (retired_tables, bucket_tables.cpp): a reader in a
//   read section may still be probing it.
// - Sweeps run with the world stopped (or while no other thread uses the cache), so they take
//   no lock: a stopped thread may hold any of them. A writer may be stopped anywhere:
//     between reading an entry and writing it: the sweep may have removed the entry (a
//     tombstone key, a null value). An insert that replaces a dead wrapper swaps the value
//     only if it is still the one it read (compare-and-swap), else inserts afresh; an erase
//     swaps the key only if it is still the identity. Neither writes into a tombstone;
//     inside a sequence window: the sweep adds 2 to the sequence (parity kept), so a reader
//     that overlapped either retries; the writer's own stores land on a slot the sweep left
//     as it was or tombstoned (an erase compares-and-swaps the key, so it does not count a
//     slot the sweep removed);
//     inside a rebuild, after copying some entries of the old table into the new one and
//     before publishing it: the sweep would remove a dead entry from the old table that the
//     new one already holds. So a rebuild announces the table it fills in `building[b]`
//     before it copies, and a sweep sweeps that one too; and the rebuild reads the old
//     table's sequence before and after its copy: a sweep in between changed it (+2), and
//     the rebuild copies again, from the swept table, into a cleared new one. A sweep after
//     the second read sees both tables, the new one complete. (The stop itself orders
//     everything: a stopped thread's stores before the stop are visible to the sweeping
//     thread, and the sweep's to the thread once it runs again.)
// - A sweep allocates nothing: its batch of wrappers is on its stack.
#include "palrt/interop/internal/host_map_state.hpp"

#include <algorithm>
#include <array>
#include <new>
#include <stdexcept>
#include <string>

#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/pal/cpu.hpp"
#include "palrt/pal/fork.hpp"

namespace palrt::interop {

namespace internal {

namespace {

constexpr std::size_t sweep_batch = 256;

std::size_t default_buckets(host_reclamation r, std::size_t asked) {
  if (asked) return asked;
  return r == host_reclamation::host_lock ? 1 : round_up_to_power_of_two(pal::processor_count());
}

bool is_live_key(const void* key) noexcept { return !detail::is_reserved_key(key); }

// The sequence window of a published table (grace_period only).
void begin_write(bucket_table* t) noexcept {
  t->seq.fetch_add(1, std::memory_order_relaxed);
  // release fence: a reader whose (S2) sees a store below also sees the odd sequence.
  std::atomic_thread_fence(std::memory_order_release);
}
void end_write(bucket_table* t) noexcept {
  // release: a reader whose (S1) reads this reads the entries as written.
  t->seq.fetch_add(1, std::memory_order_release);
}

// The slot an insert of a key not in `t` takes: the first tombstone on its path, else the
// empty slot that ends it. `reused` says which.
std::size_t insert_slot(const bucket_table& t, std::uint64_t hash, unsigned bits, bool& reused) noexcept {
  std::size_t i = detail::first_slot_of(hash, bits, t.slot_bits);
  for (;;) {
    const void* key = t.entries()[i].key.load(std::memory_order_relaxed);
    if (key == detail::tombstone_key()) {
      reused = true;
      return i;
    }
    if (!key) {
      reused = false;
      return i;
    }
    i = (i + 1) & t.mask;
  }
}

// Copies the keys of `from` into the empty table `to` (nobody else writes it): their count.
std::size_t copy_keys(const bucket_table* from, bucket_table* to, unsigned bits, rebuild_observer* o) noexcept {
  if (!from) return 0;
  std::size_t copied = 0;
  for (std::size_t i = 0; i <= from->mask; ++i) {
    const bucket_table::entry& e = from->entries()[i];
    const void* key = e.key.load(std::memory_order_relaxed);
    void* value = e.value.load(std::memory_order_relaxed);
    if (!is_live_key(key) || !value) continue;
    if (o) [[unlikely]]
      o->copying(value);
    bucket_table::entry& slot = to->entries()[first_free_slot(*to, detail::fibonacci_hash(key), bits)];
    slot.value.store(value, std::memory_order_relaxed);
    slot.key.store(key, std::memory_order_relaxed);
    ++copied;
  }
  return copied;
}

void clear(bucket_table* t) noexcept {
  for (std::size_t i = 0; i <= t->mask; ++i) {
    t->entries()[i].key.store(nullptr, std::memory_order_relaxed);
    t->entries()[i].value.store(nullptr, std::memory_order_relaxed);
  }
}

// host_lock only (nobody probes concurrently): removes slot i's entry without leaving a
// tombstone, by moving back every later entry of its cluster that may take the hole (Knuth's
// algorithm R for linear probing). An entry at j whose home slot is h may fill the hole at i
// when i lies on its probe path, [h, j): then its probe still meets no empty slot before it.
void remove_shifting(bucket_table& t, std::size_t i, unsigned bucket_bits) noexcept {
  bucket_table::entry* e = t.entries();
  for (std::size_t j = i;;) {
    j = (j + 1) & t.mask;
    const void* key = e[j].key.load(std::memory_order_relaxed);
    if (!key) break;
    const std::size_t home = detail::first_slot_of(detail::fibonacci_hash(key), bucket_bits, t.slot_bits);
    if (((j - home) & t.mask) < ((j - i) & t.mask)) continue;  // its home lies after the hole
    e[i].key.store(key, std::memory_order_relaxed);
    e[i].value.store(e[j].value.load(std::memory_order_relaxed), std::memory_order_relaxed);
    i = j;
  }
  e[i].key.store(nullptr, std::memory_order_relaxed);
  e[i].value.store(nullptr, std::memory_order_relaxed);
}

// host_lock only: drops the table's tombstones (a sweep's) in place. Tombstones become empty,
// then every key, taken in order from just after a slot that was empty, is put back at the
// first empty slot of its probe path: that path, in the old table, crossed no empty slot, so
// it lies between that empty slot and the key's old place, where every slot was already put
// back; the key lands there or earlier. Returns the keys.
std::size_t compact_in_place(bucket_table& t, unsigned bucket_bits) noexcept {
  bucket_table::entry* e = t.entries();
  std::size_t start = 0;
  while (e[start].key.load(std::memory_order_relaxed)) start = (start + 1) & t.mask;  // one is empty
  for (std::size_t i = 0; i <= t.mask; ++i)
    if (e[i].key.load(std::memory_order_relaxed) == detail::tombstone_key()) {
      e[i].key.store(nullptr, std::memory_order_relaxed);
      e[i].value.store(nullptr, std::memory_order_relaxed);
    }
  std::size_t keys = 0;
  for (std::size_t n = 0, j = (start + 1) & t.mask; n < t.mask; ++n, j = (j + 1) & t.mask) {
    const void* key = e[j].key.load(std::memory_order_relaxed);
    if (!key) continue;
    ++keys;
    void* value = e[j].value.load(std::memory_order_relaxed);
    e[j].key.store(nullptr, std::memory_order_relaxed);
    bucket_table::entry& to = e[first_free_slot(t, detail::fibonacci_hash(key), bucket_bits)];
    to.value.store(value, std::memory_order_relaxed);
    to.key.store(key, std::memory_order_relaxed);
  }
  return keys;
}

// host_lock only: a table an erase left at most 1/8 full is replaced by one sized for its keys
// (at most half full, so growing again is far off), down to the smallest table; kept as it is
// if that allocation fails.
void shrink_if_sparse(host_map_state& s, std::size_t b) noexcept {
  bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
  host_map_state::writer& w = s.writers[b];
  if (!t || t->slot_bits <= min_slot_bits || w.used * 8 > t->mask + 1) return;
  bucket_table* fresh = nullptr;
  try {
    fresh = create_table(slot_bits_for(w.used));
  } catch (const std::bad_alloc&) {
    return;
  }
  copy_keys(t, fresh, s.bucket_bits, nullptr);
  s.tables[b].store(fresh, std::memory_order_relaxed);
  destroy_table(t);
  ++w.rebuilds;
}

// Under the bucket's lock (or the host's): a table with room for one more key in an empty
// slot, replacing the current one if needed (may throw std::bad_alloc: nothing changed then).
bucket_table* make_room(host_map_state& s, std::size_t b) {
  host_map_state::writer& w = s.writers[b];
  bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
  if (t && has_room_for_one_more(*t, w.used)) return t;
  std::size_t keys = 0;
  if (t)
    for (std::size_t i = 0; i <= t->mask; ++i)
      if (is_live_key(t->entries()[i].key.load(std::memory_order_relaxed))) ++keys;
  bucket_table* fresh = create_table(slot_bits_for(keys));
  std::size_t copied = 0;
  if (s.exclusive) {
    copied = copy_keys(t, fresh, s.bucket_bits, nullptr);
  } else {
    rebuild_observer* o = s.observer.load(std::memory_order_acquire);
    // The world-stopped sweep's protocol (the top of this file).
    s.building[b].store(fresh, std::memory_order_seq_cst);
    for (;;) {
      const std::uint64_t before = t ? t->seq.load(std::memory_order_seq_cst) : 0;
      copied = copy_keys(t, fresh, s.bucket_bits, o);
      if (!t || t->seq.load(std::memory_order_seq_cst) == before) break;
      clear(fresh);
    }
  }
  // release (A): readers that load the new table see its entries.
  s.tables[b].store(fresh, std::memory_order_release);
  w.used = copied;
  ++w.rebuilds;
  if (s.exclusive) {
    destroy_table(t);
    return fresh;
  }
  s.building[b].store(nullptr, std::memory_order_seq_cst);
  if (t) {
    // Odd for good: a reader that probed it looks again (detail::host_find_concurrent).
    t->seq.fetch_add(1, std::memory_order_acq_rel);
    s.retired.retire(t);
  }
  return fresh;
}

}  // namespace

host_map_state::host_map_state(host_reclamation r, const host_cache_options& o, detail::host_hooks h)
    : reclamation(r),
      exclusive(r == host_reclamation::host_lock),
      hooks(h),
      bucket_bits(bucket_bits_for(default_buckets(r, o.buckets))),
      tables(new std::atomic<bucket_table*>[std::size_t{1} << bucket_bits]),
      building(new std::atomic<bucket_table*>[std::size_t{1} << bucket_bits]),
      writers(new writer[std::size_t{1} << bucket_bits]) {
  for (std::size_t b = 0; b < bucket_count(); ++b) {
    tables[b].store(nullptr, std::memory_order_relaxed);
    building[b].store(nullptr, std::memory_order_relaxed);
  }
}

host_map_state::~host_map_state() {
  // Nobody reads any more (the cache's contract).
  for (std::size_t b = 0; b < bucket_count(); ++b)
    destroy_table(tables[b].exchange(nullptr, std::memory_order_relaxed));
  retired.free_all();
}

// The sweeps' batch: the next up to sweep_batch cached wrappers of `t` from slot `i` on (which
// it advances), each with its slot and alive preset; how many.
std::size_t next_sweep_batch(const bucket_table& t, std::size_t& i, std::array<void*, sweep_batch>& wrappers,
                             std::array<std::size_t, sweep_batch>& slots,
                             std::array<bool, sweep_batch>& alive) noexcept {
  std::size_t n = 0;
  for (; i <= t.mask && n < sweep_batch; ++i) {
    const bucket_table::entry& e = t.entries()[i];
    void* value = e.value.load(std::memory_order_relaxed);
    if (!is_live_key(e.key.load(std::memory_order_relaxed)) || !value) continue;
    wrappers[n] = value;
    slots[n] = i;
    alive[n] = true;
    ++n;
  }
  return n;
}

}  // namespace internal

host_cache_closed::host_cache_closed(const char* operation)
    : std::logic_error(std::string("palrt: host_identity_cache::") + operation + ": the cache was closed") {}

namespace detail {

using internal::host_map_state;

host_map_core::host_map_core(host_reclamation reclamation, const host_cache_options& options, host_hooks hooks)
    : state_(std::make_unique<host_map_state>(reclamation, options, hooks)),
      bucket_bits_(state_->bucket_bits),
      reader_tables_(state_->tables.get()) {}

host_map_core::~host_map_core() = default;

void host_map_core::throw_reserved(const char* operation, const void* identity) {
  throw std::invalid_argument(std::string("host_identity_cache::") + operation + ": the identity is " +
                              (identity ? "~0, reserved for removed slots" : "null"));
}

void host_map_core::throw_closed(const char* operation) { throw host_cache_closed(operation); }

void host_map_core::throw_no_wrapper(const char* operation) {
  throw std::invalid_argument(std::string("host_identity_cache::") + operation + ": no wrapper (null)");
}

host_entry host_map_core::insert(const void* identity, void* wrapper, const char* operation, void* context) {
  host_map_state& s = *state_;
  if (!s.exclusive && s.made.forked()) throw pal::forked_child_error(std::string("host_identity_cache::") + operation);
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, s.bucket_bits);
  host_map_state::writer& w = s.writers[b];
  bool reclaim_now = false;
  host_entry result{wrapper, host_token(identity, wrapper), true};
  {
    std::unique_lock<std::mutex> lock(w.lock, std::defer_lock);
    if (!s.exclusive) lock.lock();
    // Under the lock: close() takes every bucket's lock after setting the flag, so an insert
    // either finished before close() returned or throws.
    if (closed_.load(std::memory_order_relaxed)) throw_closed(operation);
    bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
    const std::ptrdiff_t old = t ? internal::slot_of(*t, identity, hash, s.bucket_bits) : -1;
    if (old >= 0) {
      bucket_table::entry& e = t->entries()[old];
      void* cached = e.value.load(std::memory_order_relaxed);
      if (cached == wrapper) return result;  // cached already: the caller's reference stands
      if (cached && s.hooks.try_acquire(s.hooks.policy, context, cached)) {
        ++w.races_lost;
        return {cached, host_token(identity, cached), false};
      }
      // Its wrapper is being destroyed (its token not erased yet): the new one replaces it,
      // unless a world-stopped sweep removed the entry since we read it (it may have run
      // while try_acquire() was refusing): then the slot is a tombstone, and the
      // compare-and-swap fails on its cleared value. A sweep after the swap sees the new
      // wrapper under the identity, a whole entry. (The slot's key cannot change otherwise:
      // its other writers hold the bucket's lock, and a sweep clears the value with the key.)
      bool replaced = true;
      if (s.exclusive) {
        e.value.store(wrapper, std::memory_order_relaxed);  // sweeps run under the host's lock too
      } else {
        internal::begin_write(t);
        replaced = cached && e.value.compare_exchange_strong(cached, wrapper, std::memory_order_relaxed);
        internal::end_write(t);
      }
      if (replaced) {
        ++w.dead_replaced;
        ++w.inserted;
        result.replaced = cached;
        return result;
      }
      // Swept: insert it as a new entry (below), in the tombstone or another slot.
    }
    bool reused = false;
    std::size_t slot = 0;
    if (t) slot = internal::insert_slot(*t, hash, s.bucket_bits, reused);
    if (!reused) {
      const std::uint64_t rebuilds_before = w.rebuilds;
      t = internal::make_room(s, b);  // may throw std::bad_alloc: nothing changed
      reclaim_now = !s.exclusive && w.rebuilds != rebuilds_before && s.retired.due();
      slot = internal::insert_slot(*t, hash, s.bucket_bits, reused);
    }
    bucket_table::entry& e = t->entries()[slot];
    if (!s.exclusive) internal::begin_write(t);
    e.value.store(wrapper, std::memory_order_relaxed);
    e.key.store(identity, std::memory_order_relaxed);
    if (!s.exclusive) internal::end_write(t);
    if (reused)
      ++w.reused_slots;
    else
      ++w.used;
    ++w.inserted;
  }
  if (reclaim_now) s.retired.reclaim();  // after the lock: the barrier takes microseconds
  return result;
}

bool host_map_core::erase(host_token token) noexcept {
  host_map_state& s = *state_;
  const void* identity = token.identity();
  if (is_reserved_key(identity) || !token.wrapper()) return false;
  if (!s.exclusive && s.made.forked()) return false;
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, s.bucket_bits);
  host_map_state::writer& w = s.writers[b];
  std::unique_lock<std::mutex> lock(w.lock, std::defer_lock);
  if (!s.exclusive) lock.lock();
  bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
  if (!t) return false;
  const std::ptrdiff_t i = internal::slot_of(*t, identity, hash, s.bucket_bits);
  if (i < 0) return false;
  bucket_table::entry& e = t->entries()[i];
  if (e.value.load(std::memory_order_relaxed) != token.wrapper()) return false;
  if (s.exclusive) {
    internal::remove_shifting(*t, static_cast<std::size_t>(i), s.bucket_bits);
    --w.used;
    ++w.erased;
    internal::shrink_if_sparse(s, b);
    return true;
  }
  internal::begin_write(t);
  // A world-stopped sweep may have removed it since we looked: then it is not ours to count.
  const void* expected = identity;
  const bool removed = e.key.compare_exchange_strong(expected, tombstone_key(), std::memory_order_relaxed);
  if (removed) e.value.store(nullptr, std::memory_order_relaxed);
  internal::end_write(t);
  if (removed) ++w.erased;
  return removed;
}

void* host_map_core::try_get_locked(const void* identity, void* context) const noexcept {
  host_map_state& s = *state_;
  if (s.made.forked()) return nullptr;                          // a parent's thread may hold the lock
  if (closed_.load(std::memory_order_relaxed)) return nullptr;  // a lookup that began before
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, s.bucket_bits);
  std::lock_guard<std::mutex> lock(s.writers[b].lock);
  const bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
  if (!t) return nullptr;
  const std::ptrdiff_t i = internal::slot_of(*t, identity, hash, s.bucket_bits);
  if (i < 0) return nullptr;
  void* w = t->entries()[i].value.load(std::memory_order_relaxed);
  return w && s.hooks.try_acquire(s.hooks.policy, context, w) ? w : nullptr;
}

namespace {
// What lookups of a closed cache probe: a table pointer per bucket, all null (constinit: zero,
// in .bss, shared by every closed cache; never written).
constinit std::atomic<bucket_table*> no_tables[std::size_t{1} << internal::max_bucket_bits]{};
}  // namespace

void host_map_core::close() {
  host_map_state& s = *state_;
  // seq_cst: before the locks below and the grace period's epoch (what readers see first).
  closed_.store(true, std::memory_order_seq_cst);
  // Lookups miss from now on; writers (erase, sweep, counters) keep using state_->tables.
  reader_tables_.store(no_tables, std::memory_order_seq_cst);
  if (s.exclusive) return;  // under the host's lock: no call is in progress
  // A fork()ed child: a parent's thread may hold a lock, and inserts throw anyway.
  if (!s.made.forked())
    for (std::size_t b = 0; b < s.bucket_count(); ++b)
      std::lock_guard<std::mutex> wait_for_writer(s.writers[b].lock);  // an insert past its check
  // A lookup that read the flag clear is inside a read section opened before the store.
  gc::internal::wait_for_readers("palrt::interop::host_identity_cache::close");
}

void host_map_core::synchronize() {
  // Lookups run in read sections. An insert (or a lookup under the lock) calls try_acquire
  // on a cached wrapper under its bucket's lock, which the entry's erase took too: once the
  // erase returned, none is touching that wrapper.
  if (state_->exclusive) return;
  gc::internal::wait_for_readers("palrt::interop::host_identity_cache::synchronize");
}

std::size_t host_map_core::sweep(void* context, liveness_batch_fn is_alive) {
  host_map_state& s = *state_;
  std::array<void*, internal::sweep_batch> wrappers;
  std::array<std::size_t, internal::sweep_batch> slots;
  std::array<bool, internal::sweep_batch> alive;
  std::size_t removed = 0;
  for (std::size_t b = 0; b < s.bucket_count(); ++b) {
    bucket_table* current = s.tables[b].load(std::memory_order_acquire);
    bucket_table* filling = s.exclusive ? nullptr : s.building[b].load(std::memory_order_acquire);
    for (bucket_table* t : {current, filling == current ? nullptr : filling}) {
      if (!t) continue;
      std::size_t swept_here = 0;
      std::size_t i = 0;
      while (i <= t->mask) {
        const std::size_t n = internal::next_sweep_batch(*t, i, wrappers, slots, alive);
        if (n == 0) continue;
        is_alive(context, std::span<void* const>(wrappers.data(), n), std::span<bool>(alive.data(), n));
        for (std::size_t k = 0; k < n; ++k) {
          if (alive[k]) continue;
          bucket_table::entry& e = t->entries()[slots[k]];
          e.key.store(tombstone_key(), std::memory_order_relaxed);
          e.value.store(nullptr, std::memory_order_relaxed);
          ++swept_here;
        }
      }
      // +2: a reader that overlapped retries, and a writer stopped inside its window keeps
      // its parity; a rebuild that copied this table copies again. host_lock keeps no
      // tombstones: the table is compacted where it is.
      if (!s.exclusive)
        t->seq.fetch_add(2, std::memory_order_acq_rel);
      else if (swept_here)
        s.writers[b].used = internal::compact_in_place(*t, s.bucket_bits);
      if (t == current) removed += swept_here;
    }
  }
  s.swept.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

std::size_t host_map_core::sweep_concurrently(void* context, liveness_batch_fn is_alive) {
  host_map_state& s = *state_;
  if (s.exclusive) return sweep(context, is_alive);  // the host's lock serialises it already
  if (s.made.forked()) throw pal::forked_child_error("host_identity_cache::sweep_concurrently");
  std::array<void*, internal::sweep_batch> wrappers;
  std::array<std::size_t, internal::sweep_batch> slots;
  std::array<bool, internal::sweep_batch> alive;
  std::size_t removed = 0;
  for (std::size_t b = 0; b < s.bucket_count(); ++b) {
    // A batch at a time under the bucket's lock, so that an insert waits for one batch's
    // liveness tests at most, not for the bucket's. Under the lock no other writer is inside
    // the table and none is rebuilding it (a rebuild holds the lock): what is read stays as
    // read until the unlock, but for the readers, who change nothing. Between two batches an
    // insert may have replaced the table (grown or compacted it): then the walk starts over
    // on the new one, whose dead entries are still there to find (a rebuild copies entries
    // whatever their liveness). A table is replaced only when inserts fill it, so the walk
    // ends unless inserts refill a table faster than a sweep walks it (5 us a batch).
    host_map_state::writer& w = s.writers[b];
    std::uint64_t walked = 0;  // w.rebuilds + 1 of the table walked; 0: none yet
    std::size_t i = 0;
    for (;;) {
      std::lock_guard<std::mutex> lock(w.lock);
      bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
      if (!t) break;
      if (w.rebuilds + 1 != walked) {  // the count, not the address: a new table may reuse it
        walked = w.rebuilds + 1;
        i = 0;
      }
      if (i > t->mask) break;
      const std::size_t n = internal::next_sweep_batch(*t, i, wrappers, slots, alive);
      if (n == 0) continue;
      is_alive(context, std::span<void* const>(wrappers.data(), n), std::span<bool>(alive.data(), n));
      if (std::all_of(alive.begin(), alive.begin() + n, [](bool a) { return a; })) continue;
      // One write window for the batch's removals, as erase() opens one for its one: a reader
      // that overlapped it probes again (the seqlock), and one that read a removed wrapper
      // before the window holds it in its read section, which the host's grace period covers.
      std::size_t removed_here = 0;
      internal::begin_write(t);
      for (std::size_t k = 0; k < n; ++k) {
        if (alive[k]) continue;
        bucket_table::entry& e = t->entries()[slots[k]];
        e.key.store(tombstone_key(), std::memory_order_relaxed);
        e.value.store(nullptr, std::memory_order_relaxed);
        ++removed_here;
      }
      internal::end_write(t);
      // Counted per batch: is_alive may throw on a later one (the host's allocation), and
      // what this batch removed stays removed.
      s.swept.fetch_add(removed_here, std::memory_order_relaxed);
      removed += removed_here;
    }
  }
  return removed;
}

host_cache_counters host_map_core::counters() const {
  host_map_state& s = *state_;
  if (!s.exclusive && s.made.forked()) throw pal::forked_child_error("host_identity_cache::counters");
  host_cache_counters c;
  c.buckets = s.bucket_count();
  for (std::size_t b = 0; b < s.bucket_count(); ++b) {
    host_map_state::writer& w = s.writers[b];
    std::unique_lock<std::mutex> lock(w.lock, std::defer_lock);
    if (!s.exclusive) lock.lock();
    c.inserted += w.inserted;
    c.races_lost += w.races_lost;
    c.dead_replaced += w.dead_replaced;
    c.erased += w.erased;
    c.reused_slots += w.reused_slots;
    c.rebuilds += w.rebuilds;
    const bucket_table* t = s.tables[b].load(std::memory_order_relaxed);
    if (!t) continue;
    c.slots += t->mask + 1;
    c.bytes += internal::table_bytes(*t);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      const void* key = t->entries()[i].key.load(std::memory_order_relaxed);
      if (key == tombstone_key())
        ++c.tombstones;
      else if (key)
        ++c.entries;
    }
  }
  c.swept = s.swept.load(std::memory_order_relaxed);
  c.retired_tables = s.retired.count();
  return c;
}

}  // namespace detail

}  // namespace palrt::interop

// SPDX-License-Identifier: MIT
// palrt's identity map: per-processor buckets of open-addressing tables, read lock-free.
//
// Layout. Buckets = a power of two; a key's bucket is the high bits of its Fibonacci hash,
// its first slot inside the bucket's table the bits just below (bucket_hash.hpp). Readers
// load only `tables_[b]` (read-mostly, several buckets to a line) and the table itself;
// writers' locks and counts sit on lines of their own (bucket_writer).
//
// Slots. An entry is {key, handle}. Its key goes empty -> identity -> tombstone and never
// back within one table: a slot is written once (handle first, then key) and removed once.
// Removing a key leaves a tombstone; an insert never reuses one. When a table has no room
// left (keys + tombstones > 3/4), the writer builds a new table with the live keys only
// (compaction: tombstones and entries whose handle was cleared are dropped), sized for twice
// the survivors: it grows only if the survivors need it. The old table is retired and freed
// after a grace period (read sections), because readers may still be probing it; retired
// tables are freed in batches (reclaim_due()), one process-wide barrier per batch.
//
// Why a reader may trust the handle it read (the whole argument): an entry's handle is
// freed only by its record (wrapper_record::retire), which first removes the entry under the
// bucket's lock: the key becomes a tombstone, or the table is replaced. A reader
// (detail::find_in_buckets(), inline in identity_fast_path.hpp), after (A') loading the
// bucket's table (acquire, pairing with its publication (A) below):
//   (B')  loads the key (acquire) and sees the identity: the handle stored before it (B) is
//         the one it then loads;
//   (C')  loads the handle's target (acquire, handle_table::target);
//   (D)   loads the key and the bucket's table pointer again, after (C') (its acquire keeps
//         them after), and uses the target only if neither changed.
// If the target came from a store made after the handle was freed (the handle reused by
// someone else, or the table's "free" marker), that store happens after the removal (the
// record's thread removed, then freed; whoever reused the slot synchronised with the free),
// and the target's load read from it with acquire: so (D) sees the tombstone or the new
// table, and the reader retries. Otherwise the target is the wrapper the handle held while
// the entry was current, and the read section keeps its memory valid. A hit therefore
// writes nothing but the read section's two stores to the reader's own line.
//
// Why a replaced table is not freed under a reader. The reclaimer (retired_tables::reclaim()
// in bucket_tables.cpp, run by an inserting writer after it dropped its bucket's lock) takes
// two steps:
//   (R1) the scan, gc::internal::oldest_reader_epoch(): the global epoch (E in
//        reader_epoch.cpp, acquire), the process-wide barrier, the readers' epochs; it
//        returns the smaller of the epoch E read and the oldest reader's;
//   (R2) the walk, under retired_lock_: a table whose tag (retired_at, from retire_epoch():
//        B'' in reader_epoch.cpp, taken after (A) published its replacement) is below what
//        (R1) returned is freed.
// Between the two, any writer (of another bucket, or of the same one once its lock was
// dropped) may retire a table, and a reader may have opened its section after (R1) and loaded
// that very table. Its tag comes from a B'' after E in the global epoch's order, so it is not
// below what (R1) returned, and (R2) keeps it, whether or not a reader was inside a section
// during the scan. A table tagged below that was replaced (A) before its B'', which E
// synchronises with: before the barrier, as reader_epoch.cpp's argument requires.
#include "palrt/interop/internal/bucket_map.hpp"

#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/interop/internal/cache_state.hpp"
#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::interop::internal {

namespace {
// Under the lock, into a table nobody else writes: the first empty slot on the key's path.
void place(bucket_table* t, const void* key, gc::handle handle, std::uint64_t hash, unsigned bucket_bits) noexcept {
  bucket_table::entry& e = t->entries()[first_free_slot(*t, hash, bucket_bits)];
  e.value.store(detail::value_of_handle(handle), std::memory_order_relaxed);
  // release (B): a reader that sees the key sees the handle stored before it.
  e.key.store(key, std::memory_order_release);
}
}  // namespace

bucket_map::bucket_map(std::size_t buckets)
    : bucket_bits_(bucket_bits_for(buckets)),
      tables_(new std::atomic<bucket_table*>[std::size_t{1} << bucket_bits_]),
      writers_(new bucket_writer[std::size_t{1} << bucket_bits_]),
      view_{bucket_bits_, tables_.get()} {
  // Tables are made on a bucket's first insert: a cache nobody asks costs the pointers only.
  for (std::size_t b = 0; b < bucket_count(); ++b) tables_[b].store(nullptr, std::memory_order_relaxed);
}

bucket_map::~bucket_map() { close(); }

bucket_table* bucket_map::make_room(std::size_t b, bucket_writer& w) {
  // relaxed: tables_[b] is written only under this bucket's lock, which we hold.
  bucket_table* t = tables_[b].load(std::memory_order_relaxed);
  if (t && has_room_for_one_more(*t, w.used)) return t;

  // Survivors: keys whose handle still has a target. An entry whose handle was cleared is
  // dead; its record removes nothing when it finds it gone, and frees its handle as usual.
  std::size_t keep = 0;
  if (t)
    for (std::size_t i = 0; i <= t->mask; ++i) {
      const bucket_table::entry& e = t->entries()[i];
      const void* key = e.key.load(std::memory_order_relaxed);
      if (key && key != tombstone() &&
          gc::handle_table::target(detail::handle_of_value(e.value.load(std::memory_order_relaxed))))
        ++keep;
    }
  bucket_table* fresh = create_table(slot_bits_for(keep));  // may throw: nothing changed yet
  // A collection may clear more handles meanwhile (a cleared handle never gets a target
  // back): count what is copied, at most `keep`.
  std::size_t copied = 0;
  if (t)
    for (std::size_t i = 0; i <= t->mask; ++i) {
      const bucket_table::entry& e = t->entries()[i];
      const void* key = e.key.load(std::memory_order_relaxed);
      const gc::handle handle = detail::handle_of_value(e.value.load(std::memory_order_relaxed));
      if (key && key != tombstone() && gc::handle_table::target(handle)) {
        place(fresh, key, handle, fibonacci_hash(key), bucket_bits_);
        ++copied;
      }
    }
  w.used = w.live = copied;
  w.tombstones = 0;
  // release (A): readers that load the new table see its entries.
  tables_[b].store(fresh, std::memory_order_release);
  if (t) {
    ++w.rebuilds;
    retired_.retire(t);
  }
  return fresh;
}

gc::ref<gc::object> bucket_map::insert(const void* identity, attach_fn attach, void* context) {
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, bucket_bits_);
  bucket_writer& w = writers_[b];
  bool reclaim_now = false;
  {
    std::lock_guard<std::mutex> lock(w.lock);
    // Opened under the lock, so that waiting for it does not hold up grace periods: the
    // targets looked at below are not freed while we use them.
    gc::read_section section;
    bucket_table* t = tables_[b].load(std::memory_order_relaxed);
    if (t) {
      const std::ptrdiff_t old = slot_of(*t, identity, hash, bucket_bits_);
      if (old >= 0)
        if (gc::ref<gc::object> winner =
                take_live_target(detail::handle_of_value(t->entries()[old].value.load(std::memory_order_relaxed))))
          return winner;
    }
    const std::uint64_t rebuilds_before = w.rebuilds;
    t = make_room(b, w);  // may throw std::bad_alloc: nothing changed
    reclaim_now = w.rebuilds != rebuilds_before && retired_.due();
    const std::ptrdiff_t old = slot_of(*t, identity, hash, bucket_bits_);  // may be gone now
    const gc::handle handle = attach(context);                             // may throw: nothing changed
    if (old >= 0) {
      // release: a reader that sees the tombstone is past the entry (the record frees its
      // handle after this, see the top of this file).
      t->entries()[old].key.store(tombstone(), std::memory_order_release);
      --w.live;
      ++w.tombstones;
      ++w.dead_replaced;
    }
    place(t, identity, handle, hash, bucket_bits_);
    ++w.used;
    ++w.live;
  }
  if (reclaim_now) retired_.reclaim();  // after the lock: the barrier takes microseconds
  return {};
}

bool bucket_map::remove(const void* identity, gc::handle handle) noexcept {
  const std::uint64_t hash = fibonacci_hash(identity);
  const std::size_t b = bucket_of(hash, bucket_bits_);
  bucket_writer& w = writers_[b];
  std::lock_guard<std::mutex> lock(w.lock);
  if (w.closed) return false;
  bucket_table* t = tables_[b].load(std::memory_order_relaxed);
  if (!t) return false;
  const std::ptrdiff_t i = slot_of(*t, identity, hash, bucket_bits_);
  if (i < 0 || detail::handle_of_value(t->entries()[i].value.load(std::memory_order_relaxed)) != handle) return false;
  // release: see insert(); the caller frees the handle after this returns.
  t->entries()[i].key.store(tombstone(), std::memory_order_release);
  --w.live;
  ++w.tombstones;
  return true;
}

void bucket_map::close() noexcept {
  // The cache is being destroyed: nobody reads any more (its contract), and records that
  // die later find the bucket closed.
  for (std::size_t b = 0; b < bucket_count(); ++b) {
    std::lock_guard<std::mutex> lock(writers_[b].lock);
    writers_[b].closed = true;
    destroy_table(tables_[b].exchange(nullptr, std::memory_order_relaxed));
    writers_[b].used = writers_[b].live = writers_[b].tombstones = 0;
  }
  retired_.free_all();
}

map_counters bucket_map::counters() const {
  map_counters c;
  for (std::size_t b = 0; b < bucket_count(); ++b) {
    bucket_writer& w = writers_[b];
    std::lock_guard<std::mutex> lock(w.lock);
    c.entries += w.live;
    c.tombstones += w.tombstones;
    c.rebuilds += w.rebuilds;
    c.dead_replaced += w.dead_replaced;
  }
  c.retired_tables = retired_.count();
  return c;
}

std::unique_lock<std::mutex> identity_cache_access::hold_bucket_lock(identity_cache& c, const void* identity) {
  auto* buckets = dynamic_cast<bucket_map*>(c.state_->map.get());
  if (!buckets) throw std::invalid_argument("hold_bucket_lock: not the palrt design");
  const std::size_t b = bucket_of(fibonacci_hash(identity), buckets->bucket_bits_);
  return std::unique_lock(buckets->writers_[b].lock);
}

}  // namespace palrt::interop::internal

// SPDX-License-Identifier: MIT
// Bucket tables and the retired list, shared by both identity map modes (bucket_tables.hpp).
#include "palrt/interop/internal/bucket_tables.hpp"

#include <bit>
#include <new>

#include "palrt/interop/internal/bucket_hash.hpp"
#include "palrt/gc/internal/grace_period.hpp"

namespace palrt::interop::internal {

namespace {
// Replaced tables are freed once this many wait, or this many bytes (retired_tables::due()).
constexpr std::size_t reclaim_batch_tables = 16;
constexpr std::size_t reclaim_batch_bytes = 256 * 1024;
// The alignment a table is allocated with, which its release must pass again.
constexpr std::align_val_t table_alignment{alignof(bucket_table)};
}  // namespace

unsigned bucket_bits_for(std::size_t buckets) noexcept {
  const std::size_t n = round_up_to_power_of_two(buckets);
  const auto bits = static_cast<unsigned>(std::countr_zero(n));
  return bits > max_bucket_bits ? max_bucket_bits : bits;
}

unsigned slot_bits_for(std::size_t keys) noexcept {
  unsigned bits = min_slot_bits;
  while ((std::size_t{1} << bits) < 2 * (keys + 1)) ++bits;
  return bits;
}

bucket_table* create_table(unsigned slot_bits) {
  const std::size_t n = std::size_t{1} << slot_bits;
  void* memory = ::operator new(sizeof(bucket_table) + n * sizeof(bucket_table::entry), table_alignment);
  auto* t = new (memory) bucket_table;
  t->slot_bits = slot_bits;
  t->mask = n - 1;
  for (std::size_t i = 0; i < n; ++i) new (&t->entries()[i]) bucket_table::entry;
  return t;
}

void destroy_table(bucket_table* t) noexcept {
  if (!t) return;
  // entry and bucket_table are trivially destructible: nothing to run.
  ::operator delete(t, table_alignment);
}

std::size_t table_bytes(const bucket_table& t) noexcept {
  return sizeof(bucket_table) + (t.mask + 1) * sizeof(bucket_table::entry);
}

std::ptrdiff_t slot_of(const bucket_table& t, const void* key, std::uint64_t hash, unsigned bucket_bits) noexcept {
  std::size_t i = first_slot_of(hash, bucket_bits, t.slot_bits);
  for (std::size_t probes = 0; probes <= t.mask; ++probes, i = (i + 1) & t.mask) {
    // relaxed: under the lock that every writer of this table holds.
    const void* k = t.entries()[i].key.load(std::memory_order_relaxed);
    if (k == key) return static_cast<std::ptrdiff_t>(i);
    if (!k) return -1;
  }
  return -1;
}

std::size_t first_free_slot(const bucket_table& t, std::uint64_t hash, unsigned bucket_bits) noexcept {
  std::size_t i = first_slot_of(hash, bucket_bits, t.slot_bits);
  while (t.entries()[i].key.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & t.mask;
  return i;
}

void retired_tables::retire(bucket_table* t) noexcept {
  // B'' (reader_epoch.cpp): after (A) unlinked it; a scan (R1) whose E reads this increment,
  // or a later one, may pass it, and no earlier scan does.
  t->retired_at = gc::internal::retire_epoch();
  std::lock_guard<std::mutex> guard(lock_);
  t->next_retired = head_;
  head_ = t;
  ++count_;
  bytes_ += table_bytes(*t);
}

bool retired_tables::due() const noexcept {
  // A grace period costs a process-wide barrier (microseconds, and an interrupt on every
  // CPU running a thread of the process), and small buckets under churn are rebuilt every
  // few inserts: so replaced tables are freed in batches, not one barrier per rebuild.
  std::lock_guard<std::mutex> guard(lock_);
  return count_ >= reclaim_batch_tables || bytes_ >= reclaim_batch_bytes;
}

void retired_tables::reclaim() {
  // One process-wide barrier, then free what no reader can still be probing. What a reader
  // still holds, and what was retired after the scan, is freed by a later reclaim or by
  // free_all(). (R1): the scan; tables retired after it began are not below `oldest`.
  const std::uint64_t oldest = gc::internal::oldest_reader_epoch();
  // acquire: pairs with the release in watch() (the observer is built before it is published).
  if (reclaim_observer* o = observer_.load(std::memory_order_acquire)) [[unlikely]]
    o->scanned();
  std::lock_guard<std::mutex> guard(lock_);
  // (R2): the walk, over a list that may have grown since (R1).
  for (bucket_table** link = &head_; *link;) {
    bucket_table* t = *link;
    if (oldest > t->retired_at) {
      *link = t->next_retired;
      bytes_ -= table_bytes(*t);
      destroy_table(t);
      --count_;
    } else {
      link = &t->next_retired;
    }
  }
}

void retired_tables::free_all() noexcept {
  std::lock_guard<std::mutex> guard(lock_);
  while (bucket_table* t = head_) {
    head_ = t->next_retired;
    destroy_table(t);
  }
  count_ = 0;
  bytes_ = 0;
}

std::size_t retired_tables::count() const noexcept {
  std::lock_guard<std::mutex> guard(lock_);
  return count_;
}

bool retired_tables::contains(const bucket_table* t) const noexcept {
  std::lock_guard<std::mutex> guard(lock_);
  for (const bucket_table* r = head_; r; r = r->next_retired)
    if (r == t) return true;
  return false;
}

}  // namespace palrt::interop::internal

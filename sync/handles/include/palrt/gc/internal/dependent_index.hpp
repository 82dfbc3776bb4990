// SPDX-License-Identifier: MIT
// The handle table's dependent handles by primary (handle_table_options::index_dependents),
// for a collector with no "promote again" loop: its per-object mark procedure asks for the
// secondaries of each object it marks and traces them (handle_table::for_each_secondary_of).
//
// Shape: a hash of chains. Every dependent slot of an indexed table has a node (beside its
// secondary, dependent_index_node below); a node is linked into the chain of the bucket of
// the primary it was allocated with, and unlinked when the handle is released. Writers
// (link, unlink, growth) take the index's lock; they run with the world running only
// (allocate and release are never called with the world stopped).
//
// Readers take no lock and must be right in two situations:
//   - With the world stopped (Boehm's mark, parallel markers included): nothing changes while
//     they read, but a stopped writer may be anywhere. Every change a writer makes is one
//     atomic store that leaves every chain a well-formed list: a link stores the node's next
//     and then the bucket's head; an unlink stores its predecessor's next; growth builds a new
//     table of chains through the nodes' other `next` field (next[1 - generation]) without
//     touching the published chains, and publishes it with one store. So one traversal finds
//     every node linked when the world stopped.
//   - With the world running (Boehm marks the objects its finalization keeps alive after the
//     world restarted, under its own lock only): a node unlinked while a reader stands on it
//     may be linked again into another chain (its slot reused), and the reader would follow it
//     there and miss the rest of its own chain. A bucket counts its unlinks (a seqlock's
//     sequence, bumped before any later write can move the node), a table is replaced by
//     growth only with a new `current`, and a reader that sees either change reads again. A
//     reader that follows chains rewritten under it may walk in a circle: it also reads again
//     after more steps than there are nodes. A retried traversal may report a secondary twice;
//     marking twice is harmless.
// Tables replaced by growth are kept until the index is destroyed (a reader may still be on
// one): at most as much memory again as the current table.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace palrt::gc::internal {

struct dependent_index_node {
  std::atomic<dependent_index_node*> next[2] = {};  // by table generation
  std::atomic<void*>* slot = nullptr;               // the dependent slot (fixed)
  std::atomic<void*>* secondary = nullptr;          // its secondary (fixed)
  const void* key = nullptr;                        // the primary it was linked under (lock)
  bool linked = false;                              // (lock)
};

class dependent_index {
 public:
  dependent_index();
  ~dependent_index();
  dependent_index(const dependent_index&) = delete;
  dependent_index& operator=(const dependent_index&) = delete;

  // Links `node` under `primary` (its slot already holds it). Grows when chains get long; a
  // growth that cannot allocate is skipped (longer chains, nothing lost). Takes the lock.
  void link(dependent_index_node& node, const void* primary) noexcept;
  // Unlinks `node` if it is linked. Takes the lock.
  void unlink(dependent_index_node& node) noexcept;

  // Calls visit(context, secondary) for every non-null secondary of a linked node whose slot
  // holds `primary`. No lock, no allocation (see the top of this file). Returns the count
  // of the last, complete traversal.
  std::size_t for_each_secondary_of(const void* primary, void* context, void (*visit)(void*, void*)) const noexcept;

  std::size_t bytes() const noexcept;  // the current table and the replaced ones
  std::size_t bucket_count() const noexcept;
  std::size_t bucket_index(const void* primary) const noexcept {
    return bucket_of(*current_.load(std::memory_order_acquire), primary);
  }
  std::unique_lock<std::mutex> hold_lock() { return std::unique_lock(lock_); }  // tests

  // Test hook: called by a reader after it read a node's slot, before it goes on along the
  // chain (set while no reader runs).
  void (*traversal_hook)(void* context) = nullptr;
  void* traversal_hook_context = nullptr;

 private:
  struct bucket {
    std::atomic<dependent_index_node*> head{nullptr};
    std::atomic<std::uint32_t> unlinks{0};
  };
  struct table {
    std::size_t mask;
    unsigned generation;        // which of a node's next fields this table's chains use
    table* replaced = nullptr;  // the table before this one (kept, see above)
    bucket* buckets;
  };
  static table* make_table(std::size_t buckets, unsigned generation) noexcept;
  static std::size_t bucket_of(const table& t, const void* primary) noexcept;
  void grow() noexcept;  // lock held

  mutable std::mutex lock_;
  std::atomic<table*> current_;
  std::atomic<std::size_t> linked_{0};  // nodes linked (bounds a reader's walk)
};

}  // namespace palrt::gc::internal

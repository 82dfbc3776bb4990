// SPDX-License-Identifier: MIT
// What an identity cache's design provides: the map from identity to the weak handle of the
// wrapper's record. identity_cache.cpp does the rest (records, factories, the wrapper
// fields) the same way for every design, so that the benchmark compares maps and nothing else.
//
// Every design follows one protocol:
// - find() runs inside the caller's read section (read_section.hpp) and returns the target
//   of the identity's entry if it is alive, else null. It never takes a reference: the read
//   section keeps the wrapper's memory valid until it ends.
// - insert() takes the identity's writer lock and, under it: if the identity has an entry
//   whose wrapper is alive, takes a reference to that wrapper and returns it (the caller
//   lost a race). Otherwise it calls attach() (which links the new record to its wrapper and
//   returns the handle the entry must hold, or throws, changing nothing), removes the dead
//   entry if there is one, and inserts the new one; it returns empty.
// - remove() takes the writer lock and removes the identity's entry only if it holds exactly
//   `handle`. A record calls it before it frees its handle, so a handle an entry holds is
//   never freed: which is what lets palrt's lock-free find() trust a handle it read.
// - close() (the cache is being destroyed) frees every entry; later calls change nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/object.hpp"

namespace palrt::interop::internal {

struct map_counters {
  std::size_t entries = 0;
  std::size_t tombstones = 0;
  std::uint64_t dead_replaced = 0;
  std::uint64_t rebuilds = 0;
  std::size_t retired_tables = 0;
};

// attach(context): links the record and returns the handle to cache (may throw).
using attach_fn = gc::handle (*)(void* context);

class entry_map {
 public:
  virtual ~entry_map() = default;
  virtual gc::object* find(const void* identity) const noexcept = 0;
  virtual gc::ref<gc::object> insert(const void* identity, attach_fn attach, void* context) = 0;
  virtual bool remove(const void* identity, gc::handle handle) noexcept = 0;
  virtual void close() noexcept = 0;
  virtual map_counters counters() const = 0;
  virtual std::size_t bucket_count() const noexcept = 0;
};

// The wrapper a handle leads to, if it is alive (for maps, under a read section).
inline gc::object* live_target(gc::handle handle) noexcept {
  auto* target = static_cast<gc::object*>(gc::handle_table::target(handle));
  return target && gc::detail::object_access::alive(*target) ? target : nullptr;
}
// A reference to it, or empty (writers, under a read section and their lock).
inline gc::ref<gc::object> take_live_target(gc::handle handle) noexcept {
  auto* target = static_cast<gc::object*>(gc::handle_table::target(handle));
  if (!target || !gc::detail::object_access::try_add_ref(*target)) return {};
  return gc::ref<gc::object>::adopt(target);
}

}  // namespace palrt::interop::internal

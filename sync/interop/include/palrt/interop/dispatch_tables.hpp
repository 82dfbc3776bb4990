// SPDX-License-Identifier: MIT
// palrt::interop dispatch tables: the COM-style vtables a runtime exposes to native code for
// each managed type, built once per type for the whole process, and each cache instance's
// view of them.
//
// When a runtime hands a managed object to native code it hands out, per interface the
// object's type implements, a pointer to a vtable: the slots every interface of the type
// shares (QueryInterface, AddRef, Release) followed by the interface's own methods. Building
// those arrays depends only on the type, and is far too slow for every transition, so:
//
// Example:
//   // Host data, static storage duration, identified by address:
//   void qi(); void add_ref(); void release(); void read(); void write();  // the host's slots
//   constexpr interface_id istream_id = interface_id::from_guid(0x0000000c, 0, 0, {0xc0, 0, 0, 0, 0, 0, 0, 0x46});
//   const dispatch_slot unknown_slots[] = {qi, add_ref, release};
//   const dispatch_slot stream_methods[] = {read, write};
//   const interface_descriptor istream{istream_id, "IStream", stream_methods};
//   const interface_descriptor* const widget_interfaces[] = {&istream};  // and its others
//   const type_descriptor widget{"Widget", unknown_slots, widget_interfaces};
//
//   palrt::interop::dispatch_cache dispatch(policy);   // one per wrappers instance
//   const dispatch_slot* vtable = dispatch.find(widget, istream_id);  // QueryInterface
//
// Two levels:
// - Process-wide: dispatch_table_for(type) builds the type's table on its first call, in any
//   instance, and never again: one contiguous array per interface (base slots, then
//   methods) and the interfaces sorted by id for a binary search. It stores the table in the
//   descriptor itself (palrt_state below), so every later call is one load. Builds are
//   serialised by one process-wide mutex: concurrent first calls build once, the others
//   wait for the winner. A build is two allocations and a copy of the slots, and happens
//   once per type per process, so serialising builds of different types costs nothing that
//   matters. Tables are never freed.
// - Per instance: a dispatch_cache applies its dispatch_policy (which interfaces it exposes)
//   to the shared table and keeps the result, its exposed_interfaces view, for as long as
//   it lives. A process may hold several instances, each with its own policy; the policy
//   never reaches the process-wide table, so two instances never see each other's choices,
//   and a new instance builds views (a filtered copy of a few pointers) but never tables.
//
// The steady-state lookup (interfaces_for, inline below) is the L1: a monomorphic inline
// cache in the descriptor, the id of the one instance it serves and that instance's view. A
// hit is two loads from the descriptor, a compare and the increment of a thread-local
// counter: it writes no shared cache line and takes no lock. The first instance to look a
// type up claims the type's L1 by compare-exchange; the others, while it lives, use their
// own lock-free map from descriptor to view (a Fibonacci hash and a short probe:
// dispatch_view_map.hpp). A process with one instance, the usual case, always hits the L1.
// An instance gives its L1 slots back when it is destroyed, and the next instance to look
// the type up takes them over. The slot holds an id, never reused in a process, not a
// pointer to the instance: an instance can only ever match a slot it claimed itself, so no
// instance is handed a view that is not its own, least of all one that was freed with its
// instance.
//
// Thread safety: every function may be called from any thread concurrently, except that a
// dispatch_cache must not be destroyed while another thread uses it. The policy's callback
// runs with no palrt lock held, once per interface when an instance first sees a type
// (threads racing on that first lookup may each call it; one view is kept).
//
// Lifetime: a type_descriptor, and what it points to, must stay valid and unchanged for the
// rest of the process once palrt has seen it: its table is keyed by its address forever.
// A dispatch_table lives for the process; an exposed_interfaces view and the references
// into it as long as its dispatch_cache. Vtable pointers point into the process-wide
// tables and stay valid for the process.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <array>
#include <atomic>
#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace palrt::interop {

// An interface's identity: 16 bytes, as a GUID (IID) lies in memory, so a host holding a
// native GUID can copy it in. Ordered bytewise (the tables' sort order).
struct interface_id {
  std::array<std::uint8_t, 16> bytes{};

  // From a GUID's fields, {data1-data2-data3-data4}, laid out as this machine's GUID struct
  // is (data1..data3 in native byte order).
  static constexpr interface_id from_guid(std::uint32_t data1, std::uint16_t data2, std::uint16_t data3,
                                          std::array<std::uint8_t, 8> data4) noexcept {
    interface_id id;
    auto put = [&id](std::size_t at, std::uint64_t value, std::size_t size) {
      for (std::size_t i = 0; i < size; ++i) {
        const std::size_t shift = std::endian::native == std::endian::little ? i : size - 1 - i;
        id.bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * shift));
      }
    };
    put(0, data1, 4);
    put(4, data2, 2);
    put(6, data3, 2);
    for (std::size_t i = 0; i < 8; ++i) id.bytes[8 + i] = data4[i];
    return id;
  }
  friend constexpr bool operator==(const interface_id&, const interface_id&) = default;
  friend constexpr std::strong_ordering operator<=>(const interface_id&, const interface_id&) = default;
};

// One vtable slot: an opaque function pointer. The host casts its functions to it and back.
using dispatch_slot = void (*)();

// An interface a type implements: its id, a name for messages, and its own methods (the
// type's base slots come before them in the vtable). Host data, static storage duration.
struct interface_descriptor {
  interface_id id;
  const char* name = nullptr;
  std::span<const dispatch_slot> methods{};
};

class dispatch_table;
class exposed_interfaces;

namespace detail {
// palrt's per-type state, kept in the host's descriptor so that finding it is a load.
struct type_dispatch_state {
  // The process-wide table once built (dispatch_tables.cpp); then never changed or freed.
  std::atomic<const dispatch_table*> table{nullptr};
  // The L1 (dispatch_cache.cpp): the id of the instance that claimed it (0: free), and that
  // instance's view of the type (null while being claimed or given back).
  std::atomic<std::uint64_t> l1_owner{0};
  std::atomic<const exposed_interfaces*> l1_view{nullptr};
};
}  // namespace detail

// A managed type as native code sees it: the slots every interface's vtable starts with,
// and the interfaces. Host data, identified by address; it must stay valid and unchanged
// for the rest of the process once palrt has seen it (static storage duration is simplest).
// Declare it `const` and initialise the first three members only (`widget` in the example
// at the top of this file).
struct type_descriptor {
  const char* name = nullptr;
  std::span<const dispatch_slot> base_slots{};
  std::span<const interface_descriptor* const> interfaces{};
  // palrt's, not the host's: leave it out of the initialiser.
  mutable detail::type_dispatch_state palrt_state{};
};

// One interface's vtable in a dispatch_table: `slots` is the type's base slots followed by
// the interface's methods, one contiguous array; its first element is what native code is
// handed as the vtable.
struct interface_vtable {
  interface_id id;
  const interface_descriptor* descriptor = nullptr;
  std::span<const dispatch_slot> slots{};

  const dispatch_slot* vtable() const noexcept { return slots.data(); }
};

namespace internal {
class dispatch_key;  // only palrt's .cpp files make tables and views
class dispatch_tables_access;
struct dispatch_cache_state;
}  // namespace internal

namespace detail {
// Binary search of entries sorted by id; null if `id` is not among them.
inline const interface_vtable* find_interface(std::span<const interface_vtable> sorted,
                                              const interface_id& id) noexcept {
  std::size_t low = 0, high = sorted.size();
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    if (sorted[mid].id < id)
      low = mid + 1;
    else
      high = mid;
  }
  return low < sorted.size() && sorted[low].id == id ? &sorted[low] : nullptr;
}

// The L1's outcomes, counted per thread so that a hit writes no shared cache line: a test
// reads the counts of its own thread (dispatch_tables_access.hpp).
struct dispatch_lookup_counts {
  std::uint64_t l1_hits = 0;
  std::uint64_t fallback_lookups = 0;  // interfaces_for calls the L1 did not answer
};
extern constinit thread_local dispatch_lookup_counts dispatch_lookups;

// dispatch_table_for's first call for a type (dispatch_tables.cpp).
const dispatch_table& build_dispatch_table(const type_descriptor& type);
}  // namespace detail

// The process-wide dispatch table of one type: every interface's vtable, sorted by id.
class dispatch_table {
 public:
  // Only dispatch_table_for() makes tables (the key is palrt's); see there.
  dispatch_table(const internal::dispatch_key&, const type_descriptor& type);
  dispatch_table(const dispatch_table&) = delete;
  dispatch_table& operator=(const dispatch_table&) = delete;

  const type_descriptor& type() const noexcept { return *type_; }
  // One entry per interface of the type, sorted by id.
  std::span<const interface_vtable> interfaces() const noexcept { return entries_; }
  // The entry of `id`, or null if the type does not implement it.
  const interface_vtable* find(const interface_id& id) const noexcept { return detail::find_interface(entries_, id); }

 private:
  const type_descriptor* type_;
  std::vector<dispatch_slot> slots_;  // every interface's vtable, one after another
  std::vector<interface_vtable> entries_;
};

// The process-wide table of `type`, built by the first call for it in the process and
// returned by every later one (a load, inline below). Concurrent first calls build it once;
// the others wait for it. Throws std::invalid_argument, naming the type and the interface,
// if the descriptor lists a null interface or two interfaces with one id: nothing is cached
// then, and every call throws the same (the descriptor is the key, so it cannot be fixed);
// std::bad_alloc if memory runs out (nothing cached either; a later call builds again).
inline const dispatch_table& dispatch_table_for(const type_descriptor& type);

// What differs between instances.
struct dispatch_policy {
  // Whether the instance exposes `iface` of `type` to native code. Null: every interface.
  // Called with no palrt lock held, the first time the instance looks the type up (see the
  // top of this file for races); it must not throw, and must answer the same every time.
  using expose_fn = bool (*)(void* context, const type_descriptor& type, const interface_descriptor& iface) noexcept;
  expose_fn expose = nullptr;
  void* context = nullptr;
};

// One instance's view of a type: the interfaces its policy exposes, a subset of the type's
// process-wide table (the same vtable pointers), sorted by id. Lives as long as its
// dispatch_cache.
class exposed_interfaces {
 public:
  // Only a dispatch_cache makes views (the key is palrt's).
  exposed_interfaces(const internal::dispatch_key&, const dispatch_table& table, std::vector<interface_vtable> exposed,
                     std::uint64_t cache_id);
  exposed_interfaces(const exposed_interfaces&) = delete;
  exposed_interfaces& operator=(const exposed_interfaces&) = delete;

  const type_descriptor& type() const noexcept { return table_->type(); }
  const dispatch_table& table() const noexcept { return *table_; }
  // The id of the dispatch_cache this view belongs to.
  std::uint64_t cache_id() const noexcept { return cache_id_; }
  std::span<const interface_vtable> entries() const noexcept { return entries_; }
  // The entry of `id` if this instance exposes it, else null.
  const interface_vtable* find(const interface_id& id) const noexcept { return detail::find_interface(entries_, id); }

 private:
  const dispatch_table* table_;
  std::vector<interface_vtable> entries_;
  std::uint64_t cache_id_;
};

// The dispatch tables as one wrappers instance (an identity_cache, say) exposes them.
//
// After fork() (palrt/pal/fork.hpp): the process-wide tables are the child's and work. In a
// child, a dispatch_cache made before fork() is the parent's: interfaces_for() and find()
// still answer for the types it has views of (no lock), and throw pal::forked_child_error for
// a type that would need a new view or an L1 claim (under its lock). Destroying it works.
class dispatch_cache {
 public:
  explicit dispatch_cache(dispatch_policy policy = {});
  dispatch_cache(const dispatch_cache&) = delete;
  dispatch_cache& operator=(const dispatch_cache&) = delete;
  // Gives back the L1 slots it holds, then frees its views. No other thread may use it now.
  ~dispatch_cache();

  // Unique in the process for the process's lifetime (never 0, never reused).
  std::uint64_t id() const noexcept { return id_; }
  const dispatch_policy& policy() const noexcept;

  // This instance's view of `type`. On the first call for a type (in this instance): builds
  // the view from dispatch_table_for(type) and the policy, keeps it, and claims the type's
  // L1 if no live instance holds it. Later calls: a load and a compare (L1), or a lock-free
  // map lookup (another instance holds the L1). Throws what dispatch_table_for throws, or
  // std::bad_alloc; nothing is kept then.
  const exposed_interfaces& interfaces_for(const type_descriptor& type);
  // The vtable of interface `id` of `type` if this instance exposes it, else null (what
  // QueryInterface hands out). Throws as interfaces_for.
  [[nodiscard]] const dispatch_slot* find(const type_descriptor& type, const interface_id& id) {
    const interface_vtable* entry = interfaces_for(type).find(id);
    return entry ? entry->vtable() : nullptr;
  }

 private:
  friend class internal::dispatch_tables_access;
  const exposed_interfaces& interfaces_for_slow(const type_descriptor& type);

  const std::uint64_t id_;
  const std::unique_ptr<internal::dispatch_cache_state> state_;
};

inline const dispatch_table& dispatch_table_for(const type_descriptor& type) {
  // acquire: the table was built before its address was published (release, in
  // build_dispatch_table).
  if (const dispatch_table* table = type.palrt_state.table.load(std::memory_order_acquire)) return *table;
  return detail::build_dispatch_table(type);
}

inline const exposed_interfaces& dispatch_cache::interfaces_for(const type_descriptor& type) {
  const detail::type_dispatch_state& l1 = type.palrt_state;
  // (C) acquire: pairs with the claim's compare-exchange (release, dispatch_cache.cpp), which
  // itself acquired the previous owner's release (C'): so the view loaded below is this
  // instance's, or null, never an earlier owner's.
  if (l1.l1_owner.load(std::memory_order_acquire) == id_) {
    // acquire: the view was built before it was published (release, at the claim).
    if (const exposed_interfaces* view = l1.l1_view.load(std::memory_order_acquire)) {
      ++detail::dispatch_lookups.l1_hits;
      return *view;
    }
  }
  return interfaces_for_slow(type);
}

}  // namespace palrt::interop

// SPDX-License-Identifier: MIT
// copying_host::object: the layout of every object of the copying host's heap.
//
//   header (24 bytes)  bytes, fields, flags, remembered, id, forward
//   fields             `fields` object pointers (the only references the collector traces)
//   payload            raw bytes up to `bytes` (never traced; a wrapper keeps its cell here)
//
// Who writes what, and why no field but `remembered` is atomic:
//   - bytes, fields and id are written once by the allocating thread before the object is
//     published (a handle's release store, a cache insert, a root the collector reads after
//     the safepoint's lock), and only read afterwards;
//   - flags and forward are written by the allocating thread before publication and then
//     only by the collector, with the world stopped (the safepoint's mutex orders both);
//   - the fields are written by mutators through heap::write (the barrier), each object only
//     by threads that own it in this host's tests (a host that shares objects between
//     threads would make them atomic; the collector's side would not change);
//   - remembered is the write barrier's "already in a remembered set" bit: two mutators may
//     store into the same old object at once, so it is an atomic exchange.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace copying_host {

enum object_flag : std::uint8_t {
  finalizable = 1,      // its finalizer has not been queued yet (cleared when it is: it runs once)
  in_pinned_space = 2,  // allocated in the non-moving space (the only objects a pinned handle may hold)
  marked = 4,           // a pinned-space object found live by the current full collection
  wrapper = 8,          // an identity-cache wrapper: its payload holds its cell (wrappers.hpp)
  wrapper_dead = 16,    // the collector has queued this wrapper's cell for erasure
  free_block = 32,      // a dead pinned-space object, on the pinned space's free list
};

struct object {
  std::uint32_t bytes;                   // the whole object, header included, a multiple of 8
  std::uint16_t fields;                  // reference fields right after the header
  std::uint8_t flags;                    // object_flag bits
  std::atomic<std::uint8_t> remembered;  // the write barrier's bit (see the top of the file)
  std::uint64_t id;                      // unique for the life of the process: the suite's oracle key
  object* forward;                       // where the collector copied it; null otherwise

  object** slots() noexcept { return reinterpret_cast<object**>(this + 1); }
  object* field(std::size_t i) noexcept { return slots()[i]; }
  std::byte* payload() noexcept { return reinterpret_cast<std::byte*>(slots() + fields); }
  std::size_t payload_bytes() const noexcept { return bytes - sizeof(object) - fields * sizeof(object*); }
  bool has(object_flag f) const noexcept { return (flags & f) != 0; }
};
static_assert(sizeof(object) == 24, "the header is three words");

inline constexpr std::size_t object_alignment = 8;
inline constexpr std::size_t max_object_bytes = 64 * 1024;

inline std::size_t object_bytes(std::size_t fields, std::size_t payload) noexcept {
  std::size_t n = sizeof(object) + fields * sizeof(object*) + payload;
  return (n + object_alignment - 1) / object_alignment * object_alignment;
}

}  // namespace copying_host

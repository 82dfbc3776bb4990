// SPDX-License-Identifier: MIT
// The Boehm host's objects: GC_MALLOC'd cells with a canary derived from their id, so that a
// cell Boehm reclaimed and handed out again (cleared, then written by its next owner) is
// seen, and a child pointer, so that a secondary that holds pointers is traced or its child
// is lost. Shared by the host's suite and its benchmark.
#pragma once

#define GC_THREADS 1
#include <gc/gc.h>
#include <gc/gc_mark.h>

#include <cstdint>
#include <new>

namespace boehm_host {

struct cell {
  std::uint64_t canary;
  cell* child;
  std::uint64_t id;
  const void* native;  // an identity-cache wrapper's native object (null otherwise)
};

inline std::uint64_t canary_of(std::uint64_t id) noexcept { return (id * 0x9E3779B97F4A7C15ULL) ^ 0xC0FFEE5EEDULL; }

inline cell* make_cell(std::uint64_t id, cell* child = nullptr) {
  auto* c = static_cast<cell*>(GC_MALLOC(sizeof(cell)));
  if (!c) throw std::bad_alloc();
  c->canary = canary_of(id);
  c->child = child;
  c->id = id;
  return c;
}

// A cell in memory that `make` returned (GC_MALLOC or the binding's traced kind).
template <class Make>
cell* make_cell_with(Make&& make, std::uint64_t id, cell* child = nullptr) {
  auto* c = static_cast<cell*>(make(sizeof(cell)));
  c->canary = canary_of(id);
  c->child = child;
  c->id = id;
  return c;
}

inline bool intact(const cell* c) noexcept { return c && c->canary == canary_of(c->id); }

// Garbage that makes Boehm reuse what it reclaimed: freed cells get new owners, which
// overwrite them (a dangling handle then sees a wrong canary).
inline void churn_heap(int n) {
  for (int i = 0; i < n; ++i) {
    auto* junk = static_cast<std::uint64_t*>(GC_MALLOC(sizeof(cell)));
    if (!junk) throw std::bad_alloc();
    junk[0] = 0xDEADBEEFDEADBEEFULL;
    junk[2] = 0xFFFFFFFFFFFFFFFFULL;
  }
}

}  // namespace boehm_host

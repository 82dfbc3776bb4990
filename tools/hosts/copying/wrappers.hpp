// SPDX-License-Identifier: MIT
// copying_host::wrapper_cache: palrt's identity cache (host mode, grace_period) for a heap
// whose collector moves the wrappers.
//
// The question a JVM binding faces. host_identity_cache stores one void* per identity and
// never updates it; a moving collector changes the wrapper's address at every collection
// that copies it. Fixing the cache up in each pause would cost in proportion to every cached
// wrapper at every young collection (the generational walks exist to avoid exactly that), and
// palrt's cache offers no such pass anyway. So the cache must hold something that does not
// move and through which the wrapper is found: a palrt weak_short handle, which the collector
// relocates anyway (sweep_relocate, young blocks only) and clears when the wrapper dies:
// exactly a JNI weak global reference.
//
// What the cache stores is a small native "cell" per wrapper, {table, weak_short handle,
// identity}, allocated with new; not the handle's address itself, because palrt gives no way
// back from handle::address() to a handle (gc::handle has no public constructor from a slot
// address), and the policy's try_acquire() must read the handle. The cell is
// the JNI weak global's equivalent of a jweak value.
//   try_acquire(cell)  the handle's target is non-null: the wrapper lives. The pointer read is
//                      valid until the calling thread's next safepoint (get() roots it).
//                      weak_short is right: the heap sweeps them with the world stopped, so
//                      the raw read never returns a wrapper found dead.
//   the wrapper object carries its cell in its payload (object_flag::wrapper), so that the
//   collector's weak_short sweep, reporting a dead wrapper (on_cleared), finds the cell.
//   erase and free     after the world runs again (the pause neither takes the cache's locks
//                      nor releases handles: handle_table.hpp's world-stopped rules): erase
//                      by token (identity, cell); then gc::retire(cell) releases the handle
//                      and frees the cell after a grace period: a try_get() that found the
//                      cell just before the erase may still call try_acquire() on it, which
//                      reads the (cleared) handle and refuses it.
//   a lost race        get_or_create() releases the loser's cell at once (never published).
//
// Cost: a hit is the cache's probe plus one handle load; the cell adds a native allocation
// and a handle per wrapper, freed only after the wrapper died.
#pragma once

#include <cstring>
#include <mutex>
#include <span>
#include <new>
#include <vector>

#include "heap.hpp"
#include "palrt/gc/retire.hpp"
#include "palrt/interop/host_identity_cache.hpp"

namespace copying_host {

struct wrapper_cell {
  palrt::gc::handle_table* table;
  palrt::gc::handle weak;  // weak_short to the wrapper object
  const void* identity;
};

struct wrapper_policy {
  static constexpr palrt::interop::host_reclamation reclamation = palrt::interop::host_reclamation::grace_period;
  static bool try_acquire(void* c) noexcept {
    return palrt::gc::handle_table::target(static_cast<wrapper_cell*>(c)->weak) != nullptr;
  }
  // A factory's cell that lost the race: nobody else saw it.
  static void release(void* c) noexcept { free_cell(c); }
  static void free_cell(void* c) noexcept {
    auto* cell = static_cast<wrapper_cell*>(c);
    (void)cell->table->release(cell->weak);
    delete cell;
  }
};

class wrapper_cache {
 public:
  explicit wrapper_cache(heap& h) : heap_(h) {
    h.set_wrapper_hooks([this](object* w) { died(w); }, [this] { after_resume(); });
  }
  wrapper_cache(const wrapper_cache&) = delete;
  wrapper_cache& operator=(const wrapper_cache&) = delete;
  // With no thread using the cache or the heap: frees every cell (live wrappers' too) and
  // waits for the retired ones.
  ~wrapper_cache() {
    heap_.set_wrapper_hooks({}, {});
    after_resume();
    std::vector<void*> cells;
    (void)cache_.sweep([&](std::span<void* const> ws, std::span<bool> alive) {
      for (std::size_t i = 0; i < ws.size(); ++i) {
        cells.push_back(ws[i]);
        alive[i] = false;
      }
    });
    for (void* c : cells) wrapper_policy::free_cell(c);
    (void)palrt::gc::drain_retired();
  }

  // The wrapper of `identity` (a safepoint): the same object, wherever the collector moved
  // it, for as long as it lives; a new one (payload_bytes of payload besides the cell) once
  // it died. Valid until the caller's next safepoint: root it.
  object* get(mutator& m, const void* identity, std::size_t payload_bytes = 0) {
    palrt::interop::host_entry e = cache_.get_or_create(identity, [&](const void* id) -> void* {
      object* w = heap_.allocate(m, 0, sizeof(wrapper_cell*) + payload_bytes);
      // No safepoint from here to the read below: w cannot move.
      w->flags |= wrapper;
      auto* cell = new wrapper_cell{&heap_.handles(), {}, id};
      cell->weak = heap_.handles().allocate(palrt::gc::handle_kind::weak_short, w);
      std::memcpy(w->payload(), &cell, sizeof cell);
      return cell;
    });
    // try_acquire() (or the factory) saw a live wrapper, and no safepoint came since.
    return static_cast<object*>(palrt::gc::handle_table::target(static_cast<wrapper_cell*>(e.wrapper)->weak));
  }

  palrt::interop::host_cache_counters counters() const { return cache_.counters(); }

 private:
  // World stopped (the collector's weak_short sweep): queue the cell; nothing else here.
  void died(object* w) {
    wrapper_cell* cell;
    std::memcpy(&cell, w->payload(), sizeof cell);
    std::lock_guard l(dead_lock_);  // never held across a safepoint
    dead_.push_back(cell);
  }
  // World running: erase by token, then free after a grace period.
  void after_resume() {
    std::vector<wrapper_cell*> dead;
    {
      std::lock_guard l(dead_lock_);
      dead.swap(dead_);
    }
    for (wrapper_cell* cell : dead) {
      (void)cache_.erase(palrt::interop::host_token(cell->identity, cell));
      palrt::gc::retire(cell, [](void* c) noexcept { wrapper_policy::free_cell(c); });
    }
  }

  heap& heap_;
  palrt::interop::host_identity_cache<wrapper_policy> cache_;
  std::mutex dead_lock_;
  std::vector<wrapper_cell*> dead_;
};

}  // namespace copying_host

// SPDX-License-Identifier: MIT
// copying_host::heap::collection: one collection, young or full, with the world stopped, on
// the collecting thread alone (palrt's walks could be shared by several GC threads; one is
// enough for this heap's sizes).
//
// The order, CoreCLR's (handle_table.hpp), with g = 0 for a young collection and
// palrt::gc::all_generations for a full one, every walk a handle_walk(table, kind, g):
//   1. pinned targets (for_each_target): checked to be in the pinned space, which never
//      moves; a full collection marks them. Before anything is evacuated.
//   2. roots: shadow stacks, globals, finalization queue, (young) the remembered set, then
//      strong handles (for_each_slot + handle_slot::relocate); the Cheney scan.
//   3. dependents: one gc::dependent_promotion for the collection (linear in the dependent
//      handles whatever the order of their primaries): start() marks the secondaries of the
//      handles whose primary lives already, and every object the collection keeps from then
//      on (copied, or marked in the pinned space) is reported to it by its old address
//      (on_marked), which keeps the secondaries waiting on it.
//   4. weak_short: sweep_relocate (dead cleared, live relocated), before finalization, so a
//      short weak handle never sees an object being finalized. Dead wrappers are reported
//      to the identity cache's hook here.
//   5. finalization scan: the dead finalizable candidates, all decided before any is kept,
//      are copied (kept, with what they reach), queued and lose their flag; the promotion
//      keeps the secondaries of what they reach.
//   6. weak_long and dependent: sweep_relocate; a dependent's live secondary is forwarded.
//   7. (full) the pinned space's unmarked objects are freed.
//   8. table.age_handles(g, 1): every survivor is now in the old generation (1).
//   9. the evacuated spaces are closed (PROT_NONE).
// Ages are what make step 1-6 cost nothing for old handles in a young collection: a handle
// that can point into the nursery was stored since the last collection, so its block is
// young (handle_table.hpp, "Generations").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <optional>

#include "heap.hpp"
#include "palrt/gc/dependent_promotion.hpp"
#include "palrt/gc/handle_walk.hpp"

namespace copying_host {

namespace gc = palrt::gc;

class heap::collection {
 public:
  collection(heap& h, collection_kind kind)
      : h_(h), full_(kind == collection_kind::full), g_(full_ ? gc::all_generations : std::uint8_t{0}) {
    from_old_ = h_.old_;
    if (full_) {
      to_ = (h_.old_ == &h_.old_semispaces_[0]) ? &h_.old_semispaces_[1] : &h_.old_semispaces_[0];
      to_->open();
      top_ = to_->begin();
    } else {
      to_ = h_.old_;
      top_ = h_.old_top_;
    }
    scan_ = top_;
    stats_.kind = kind;
  }

  collection_stats run() {
    pinned_targets();
    roots();
    scan();
    promote_dependents();
    sweep_weak_short();
    finalization_scan();
    sweep_late();
    if (full_) free_dead_pinned();
    h_.table_.age_handles(g_, 1);
    flip();
    return stats_;
  }

 private:
  bool condemned(const void* p) const noexcept { return h_.nursery_->contains(p) || (full_ && from_old_->contains(p)); }
  bool alive(const void* p) const noexcept {
    auto* o = static_cast<const object*>(p);
    if (condemned(p)) return o->forward != nullptr;
    if (full_ && h_.pinned_.contains(p)) return o->has(marked);
    return true;  // not condemned
  }
  // Where a live object is now, or null if it is dead.
  object* forward(void* p) const noexcept {
    auto* o = static_cast<object*>(p);
    if (condemned(p)) return o->forward;
    if (full_ && h_.pinned_.contains(p)) return o->has(marked) ? o : nullptr;
    return o;
  }
  // Keeps o alive: copies a condemned object (once), marks a pinned-space one (full), and
  // returns where it is now.
  object* keep(object* o) {
    if (!o) return o;
    if (condemned(o)) {
      if (o->forward) return o->forward;
      if (static_cast<std::size_t>(to_->end() - top_) < o->bytes) {
        std::fprintf(stderr, "copying host: heap exhausted: the old space (%zu bytes) cannot hold the survivors\n",
                     to_->bytes());
        std::abort();
      }
      auto* n = reinterpret_cast<object*>(top_);
      top_ += o->bytes;
      std::memcpy(static_cast<void*>(n), static_cast<const void*>(o), o->bytes);
      n->remembered.store(0, std::memory_order_relaxed);  // world stopped: no barrier runs
      n->forward = nullptr;
      o->forward = n;
      stats_.copied_bytes += o->bytes;
      kept(o);
      return n;
    }
    if (full_ && h_.pinned_.contains(o) && !o->has(marked)) {
      o->flags |= marked;
      grey_.push_back(o);
      kept(o);
    }
    return o;
  }
  // An object the collection keeps from now on, by the address the handles hold: the
  // dependent handles waiting on it keep their secondaries (queued on waiting_, kept by the
  // scan: keeping them here would recurse once per link of a chain).
  void kept(object* o) {
    if (promotion_) promotion_->on_marked(o, [&](void* s) { waiting_.push_back(static_cast<object*>(s)); });
  }
  void keep_fields(object* o) {
    object** f = o->slots();
    for (std::size_t i = 0; i < o->fields; ++i) f[i] = keep(f[i]);
  }
  // Cheney: the to-space between scan_ and top_ is the queue; pinned-space objects marked by
  // a full collection wait on grey_.
  void scan() {
    for (;;) {
      while (scan_ < top_) {
        auto* o = reinterpret_cast<object*>(scan_);
        scan_ += o->bytes;
        keep_fields(o);
      }
      if (!waiting_.empty()) {
        object* s = waiting_.back();
        waiting_.pop_back();
        keep(s);
        continue;
      }
      if (grey_.empty()) return;
      object* o = grey_.back();
      grey_.pop_back();
      keep_fields(o);
    }
  }

  void pinned_targets() {
    gc::handle_walk(h_.table_, gc::handle_kind::pinned, g_).for_each_target([&](void* t) {
      if (!h_.pinned_.contains(t)) {
        std::fprintf(stderr,
                     "copying host: a pinned handle holds %p, which is in %s, not in the pinned space: "
                     "allocate objects to pin with allocate_pinned()\n",
                     t, h_.region_of(t) ? h_.region_of(t) : "no space of this heap");
        std::abort();
      }
      keep(static_cast<object*>(t));  // full: marked; young: not condemned, nothing to do
    });
  }

  void roots() {
    for (mutator* m : h_.world_.mutators())
      for (object*& o : m->roots) o = keep(o);
    for (object*& o : h_.globals_) o = keep(o);
    for (object*& o : h_.ready_) o = keep(o);
    // The remembered set: a young collection treats the old objects that got a nursery
    // pointer as roots; a full one traces everything and drops it.
    auto remembered = [&](std::vector<object*>& set) {
      for (object* r : set) {
        r->remembered.store(0, std::memory_order_relaxed);
        if (!full_) keep_fields(r);
      }
      set.clear();
    };
    for (mutator* m : h_.world_.mutators()) remembered(m->remembered);
    remembered(h_.detached_remembered_);
    gc::handle_walk(h_.table_, gc::handle_kind::strong, g_).for_each_slot([&](gc::handle_slot slot) {
      auto* t = static_cast<object*>(slot.target());
      if (!t) return;
      object* n = keep(t);
      if (n != t) slot.relocate(t, n);
    });
  }

  // Step 3: from here to the end of the collection every kept object is reported to the
  // promotion (kept()); the handles whose primary is already alive are promoted by start().
  void promote_dependents() {
    promotion_.emplace(h_.table_, g_);
    ++stats_.promote_rounds;
    promotion_->start([&](void* p) { return alive(p); }, [&](void* s) { waiting_.push_back(static_cast<object*>(s)); });
    scan();
  }

  void sweep_weak_short() {
    stats_.weak_short_cleared = gc::handle_walk(h_.table_, gc::handle_kind::weak_short, g_)
                                    .sweep_relocate([&](void* t) -> void* { return forward(t); },
                                                    [&](void* t, void*) {
                                                      auto* o = static_cast<object*>(t);
                                                      if (o->has(wrapper) && !o->has(wrapper_dead)) {
                                                        o->flags |= wrapper_dead;
                                                        if (h_.wrapper_died_) h_.wrapper_died_(o);
                                                      }
                                                    });
  }

  void finalization_scan() {
    std::vector<object*> candidates;
    std::vector<object*> survivors;
    auto consider = [&](std::vector<object*>& list) {
      for (object* o : list) candidates.push_back(o);
      list.clear();
    };
    for (mutator* m : h_.world_.mutators()) consider(m->young_finalizable);
    consider(h_.detached_finalizable_);
    if (full_) consider(h_.old_finalizable_);
    // Decided for all before any is kept: an object reachable only from another dead
    // finalizable object is dead too, and queued.
    std::vector<object*> dead;
    for (object* o : candidates) (alive(o) ? survivors : dead).push_back(o);
    for (object* o : survivors) h_.old_finalizable_.push_back(forward(o));
    for (object* o : dead) {
      object* n = keep(o);
      n->flags &= static_cast<std::uint8_t>(~finalizable);
      h_.ready_.push_back(n);
    }
    stats_.finalizers_queued = dead.size();
    scan();
  }

  void sweep_late() {
    auto fwd = [&](void* t) -> void* { return forward(t); };
    stats_.weak_long_cleared = gc::handle_walk(h_.table_, gc::handle_kind::weak_long, g_).sweep_relocate(fwd);
    stats_.dependents_cleared = gc::handle_walk(h_.table_, gc::handle_kind::dependent, g_).sweep_relocate(fwd);
  }

  void free_dead_pinned() {
    for (std::byte* p = h_.pinned_.begin(); p < h_.pinned_top_;) {
      auto* o = reinterpret_cast<object*>(p);
      p += o->bytes;
      if (o->has(free_block)) continue;
      if (o->has(marked)) {
        o->flags &= static_cast<std::uint8_t>(~marked);
        continue;
      }
      const std::size_t bytes = o->bytes;
      // Poisoned, so a stale pointer into a freed pinned object reads garbage ids.
      std::memset(static_cast<void*>(o), 0xdb, bytes);
      o->bytes = static_cast<std::uint32_t>(bytes);
      o->fields = 0;
      o->flags = free_block;
      o->remembered.store(0, std::memory_order_relaxed);
      h_.pinned_free_[bytes].push_back(o);
      ++stats_.pinned_freed;
    }
  }

  void flip() {
    // The nursery: everything in it was evacuated or is dead. Close it; allocate in the other.
    space* other = (h_.nursery_ == &h_.nursery_halves_[0]) ? &h_.nursery_halves_[1] : &h_.nursery_halves_[0];
    h_.nursery_->close();
    other->open();
    h_.nursery_ = other;
    h_.nursery_offset_.store(0, std::memory_order_relaxed);  // world stopped
    for (mutator* m : h_.world_.mutators()) m->tlab = m->tlab_end = nullptr;
    if (full_) {
      from_old_->close();
      h_.old_ = to_;
    }
    h_.old_top_ = top_;
  }

  heap& h_;
  const bool full_;
  const std::uint8_t g_;
  space* from_old_;
  space* to_;
  std::byte* top_;
  std::byte* scan_;
  std::vector<object*> grey_;
  std::optional<gc::dependent_promotion> promotion_;
  std::vector<object*> waiting_;  // secondaries the promotion reported, to keep
  collection_stats stats_;
};

collection_stats heap::collect_stopped(collection_kind kind) {
  // A young collection needs room for the whole nursery in the old space (every object may
  // survive); otherwise it becomes a full one.
  const std::size_t used = std::min(nursery_offset_.load(std::memory_order_relaxed), nursery_->bytes());
  if (kind == collection_kind::young && static_cast<std::size_t>(old_->end() - old_top_) < used)
    kind = collection_kind::full;
  if (observer_) observer_->before(*this, kind);
  const auto t0 = std::chrono::steady_clock::now();
  collection_stats stats = collection(*this, kind).run();
  stats.pause_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  stats.number = collections_.fetch_add(1, std::memory_order_relaxed) + 1;
  (kind == collection_kind::young ? young_ : full_).fetch_add(1, std::memory_order_relaxed);
  if (observer_) observer_->after(*this, stats);
  return stats;
}

}  // namespace copying_host

// SPDX-License-Identifier: MIT
// copying_host::heap: allocation, threads, globals and the finalization queue. The
// collection itself is collector.cpp.
#include "heap.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>

namespace copying_host {

const char* collection_kind_name(collection_kind k) noexcept { return k == collection_kind::young ? "young" : "full"; }

heap::heap(palrt::gc::handle_table& table, heap_options options)
    : table_(table),
      options_(options),
      nursery_halves_{space(options.nursery_bytes, "nursery 0"), space(options.nursery_bytes, "nursery 1")},
      old_semispaces_{space(options.old_bytes, "old 0"), space(options.old_bytes, "old 1")},
      pinned_(options.pinned_bytes, "pinned"),
      nursery_(&nursery_halves_[0]),
      old_(&old_semispaces_[0]),
      old_top_(old_->begin()),
      pinned_top_(pinned_.begin()) {
  // What is not allocated in is closed from the start: the stale-pointer check covers it too.
  nursery_halves_[1].close();
  old_semispaces_[1].close();
  // One collector per table (handle_table::claim_for_collector): a second heap on the same
  // table would clear handles by its own idea of what lives.
  table_.claim_for_collector(this);
}

heap::~heap() { table_.release_collector(this); }

void heap::detach(mutator& m) {
  world_.detach(m, [&] {
    detached_remembered_.insert(detached_remembered_.end(), m.remembered.begin(), m.remembered.end());
    detached_finalizable_.insert(detached_finalizable_.end(), m.young_finalizable.begin(), m.young_finalizable.end());
    m.remembered.clear();
    m.young_finalizable.clear();
    m.tlab = m.tlab_end = nullptr;
  });
}

void heap::init(object* o, std::size_t bytes, std::size_t fields, std::uint8_t flags) noexcept {
  // The memory may hold an older object (a reused nursery half, a freed pinned block).
  std::memset(static_cast<void*>(o), 0, bytes);
  o->bytes = static_cast<std::uint32_t>(bytes);
  o->fields = static_cast<std::uint16_t>(fields);
  o->flags = flags;
  // relaxed: ids only need to be unique.
  o->id = next_id_.fetch_add(1, std::memory_order_relaxed);
}

bool heap::refill(mutator& m, std::size_t bytes) noexcept {
  const std::size_t want = bytes > options_.tlab_bytes ? bytes : options_.tlab_bytes;
  // relaxed: the range is this thread's alone (see nursery_offset_).
  const std::size_t start = nursery_offset_.fetch_add(want, std::memory_order_relaxed);
  if (start + want > nursery_->bytes()) return false;
  m.tlab = nursery_->begin() + start;
  m.tlab_end = m.tlab + want;
  return true;
}

object* heap::allocate(mutator& m, std::size_t fields, std::size_t payload, std::uint8_t flags) {
  const std::size_t n = object_bytes(fields, payload);
  if (n > max_object_bytes || fields > 0xffff) throw std::length_error("copying host: object too large");
  flags &= finalizable;
  for (;;) {
    poll(m);
    if (static_cast<std::size_t>(m.tlab_end - m.tlab) >= n) {
      auto* o = reinterpret_cast<object*>(m.tlab);
      m.tlab += n;
      init(o, n, fields, flags);
      if (flags & finalizable) m.young_finalizable.push_back(o);
      return o;
    }
    if (!refill(m, n)) collect_for_allocation(m);
  }
}

object* heap::allocate_pinned(mutator& m, std::size_t fields, std::size_t payload, std::uint8_t flags) {
  const std::size_t n = object_bytes(fields, payload);
  if (n > max_object_bytes || fields > 0xffff) throw std::length_error("copying host: object too large");
  flags = static_cast<std::uint8_t>((flags & finalizable) | in_pinned_space);
  for (int attempt = 0;; ++attempt) {
    poll(m);
    object* o = nullptr;
    {
      std::lock_guard l(pinned_lock_);
      auto it = pinned_free_.find(n);
      if (it != pinned_free_.end() && !it->second.empty()) {
        o = it->second.back();
        it->second.pop_back();
      } else if (static_cast<std::size_t>(pinned_.end() - pinned_top_) >= n) {
        o = reinterpret_cast<object*>(pinned_top_);
        pinned_top_ += n;
      }
      if (o) init(o, n, fields, flags);
    }
    if (o) {
      // Old from birth, but a candidate of the next young collection's finalization scan,
      // which finds it alive (not condemned) and moves it to the old list.
      if (flags & finalizable) m.young_finalizable.push_back(o);
      return o;
    }
    if (attempt == 1) {
      std::fprintf(stderr, "copying host: the pinned space (%zu bytes) is full after a full collection\n",
                   pinned_.bytes());
      std::abort();
    }
    collect(&m, collection_kind::full);
  }
}

void heap::collect_for_allocation(mutator& m) {
  const std::uint64_t seen = collections_.load(std::memory_order_relaxed);
  // Someone else collected since this thread's allocation failed: the nursery is new.
  if (!world_.stop(&m, [&] { return collections_.load(std::memory_order_relaxed) == seen; })) return;
  const bool full = options_.full_every && ++allocation_collections_ % options_.full_every == 0;
  const collection_stats stats = collect_stopped(full ? collection_kind::full : collection_kind::young);
  world_.resume(&m);
  after_resume(stats);
}

void heap::collect(mutator* self, collection_kind kind) {
  world_.stop(self, [] { return true; });
  const collection_stats stats = collect_stopped(kind);
  world_.resume(self);
  after_resume(stats);
}

void heap::after_resume(const collection_stats& stats) {
  if (wrapper_after_resume_) wrapper_after_resume_();
  if (finalizer_thread_ && stats.finalizers_queued) finalizer_thread_->signal_work();
}

std::size_t heap::add_global(object* o) {
  std::lock_guard l(globals_lock_);
  globals_.push_back(o);
  return globals_.size() - 1;
}
object* heap::global(std::size_t i) {
  std::lock_guard l(globals_lock_);
  return globals_.at(i);
}
void heap::set_global(std::size_t i, object* o) {
  std::lock_guard l(globals_lock_);
  globals_.at(i) = o;
}

// The finalizer thread's side of host_finalization_source: attached for the call, one object
// at a time, polling between finalizers so that a collection never waits for more than one.
std::size_t heap::run_ready(void* self) {
  auto& h = *static_cast<heap*>(self);
  mutator m;
  h.attach(m);
  std::size_t ran = 0;
  for (;;) {
    object* o = nullptr;
    {
      std::lock_guard l(h.ready_lock_);
      if (h.ready_.empty()) break;
      o = h.ready_.front();
      h.ready_.pop_front();
    }
    m.roots.assign(1, o);  // reachable while the finalizer runs
    ++ran;
    try {
      if (h.finalizer_) h.finalizer_(h, m, o);
    } catch (...) {
      m.roots.clear();
      h.detach(m);
      throw;  // contained and counted by the finalizer thread
    }
    m.roots.clear();
    h.poll(m);
  }
  h.detach(m);
  return ran;
}

const char* heap::region_of(const void* p) const noexcept {
  for (const space& s : nursery_halves_)
    if (s.contains(p)) return s.is_protected() ? "an evacuated nursery half (PROT_NONE)" : "the nursery";
  for (const space& s : old_semispaces_)
    if (s.contains(p)) return s.is_protected() ? "an evacuated old semispace (PROT_NONE)" : "the old space";
  if (pinned_.contains(p)) return "the pinned space";
  return nullptr;
}

}  // namespace copying_host

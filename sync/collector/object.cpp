// SPDX-License-Identifier: MIT
// Objects of the embedded collector: construction through make_object, death, and the
// finalization controls (suppress, reregister, resurrect).
#include "palrt/gc/object.hpp"

#include <cstdio>
#include <cstdlib>

#include "palrt/gc/collector.hpp"
#include "palrt/gc/internal/collector_state.hpp"

namespace palrt::gc {

namespace internal {
namespace {
// The collector of the object make_object is constructing on this thread; object() takes it
// (before any member of the derived class is constructed, so a make_object nested in a
// derived constructor sets it afresh).
constinit thread_local collector_state* constructing = nullptr;
}  // namespace
}  // namespace internal

namespace detail {
using internal::collector_state;
using internal::constructing;

void object_access::begin_construction(collector& c) noexcept {
  constructing = c.state_.get();  // no shared_ptr copy: two shared atomics per object saved
}

void object_access::end_construction() noexcept { constructing = nullptr; }

void object_access::created(object& o) {
  collector_state& c = *o.collector_;
  // The thread's own record of c (dead_lists.hpp): the count is this thread's, on its line.
  internal::dead_list_record& mine = c.lists.mine();
  if (c.lists.count_created(mine, c.options.collect_every)) collect_now(c, mine);
}

handle_table& object_access::table_of(const object& o) noexcept { return o.collector_->table; }

}  // namespace detail

object::object() : collector_(internal::constructing) {
  internal::constructing = nullptr;
  if (!collector_) {
    std::fprintf(stderr, "palrt: a palrt::gc::object was constructed outside make_object(); its collector "
                         "could never free it\n");
    std::abort();
  }
}

object::~object() = default;

void object::died() noexcept {
  // Everything read from the object first: once it is on the dead list, a collection on
  // another thread may free it at any moment.
  internal::collector_state& c = *collector_;
  internal::note_death(c);
  c.lists.push(c.lists.mine(), this);  // this thread's dead list of c (dead_lists.cpp)
}

finalizable::finalizable() {
  flags_.store(internal::has_finalizer | internal::finalization_registered, std::memory_order_relaxed);
}

ref<finalizable> finalizable::resurrect() noexcept {
  // Only the finalizer thread, inside this object's finalize(), sees it finalizing.
  if (state_.load(std::memory_order_relaxed) != internal::finalizing) return {};
  if (flags_.load(std::memory_order_relaxed) & internal::resurrected) {
    // Resurrected before in this finalize(): alive only while a reference from then is held.
    // Once they are all dropped (on any thread) the count is zero again and died() has put
    // the object back on a dead list; raising it from there would leave a live object on
    // that list, which the next collect() frees. Zero is terminal: a CAS that refuses it
    // (try_add_ref; relaxed, as there: a raise from n > 0 orders nothing else).
    if (try_add_ref()) return ref<finalizable>::adopt(this);
    return {};
  }
  // The count is zero and nobody else can raise it (zero is terminal; the object is on no
  // list but this thread's): store, not CAS.
  strong_.store(1, std::memory_order_relaxed);
  flags_.fetch_or(internal::resurrected, std::memory_order_relaxed);
  return ref<finalizable>::adopt(this);
}

void suppress_finalize(finalizable& o) noexcept {
  // relaxed: read by the collect() that finds the object dead, which synchronises with the
  // last release of its count (acq_rel), and that release follows this call.
  static_cast<object&>(o).flags_.fetch_and(static_cast<std::uint8_t>(~internal::finalization_registered),
                                           std::memory_order_relaxed);
}

void reregister_for_finalize(finalizable& o) noexcept {
  static_cast<object&>(o).flags_.fetch_or(internal::finalization_registered, std::memory_order_relaxed);
}

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// A dispatch_cache: one instance's views of the process-wide tables, and the L1 in each
// type's descriptor (dispatch_tables.hpp states the design).
//
// The L1 protocol, per type descriptor (fields l1_owner, l1_view):
// - Claim (slow path, under the instance's lock): compare-exchange l1_owner from 0 to the
//   instance's id, acq_rel (C'' below); on success, store the view with release. Only the
//   owner writes either field while it owns the slot, so the claim is the one writer.
// - Hit (inline, any thread of the instance): load l1_owner with acquire (C); if it is the
//   instance's own id, load the view with acquire; null (a claim half done) counts as a miss.
// - Give back (the instance's destructor, no other thread using it): store a null view
//   (relaxed), then l1_owner = 0 with release (C').
// Why a hit never returns another instance's view: ids are never reused, so l1_owner equal
// to my id means I claimed it, and my claim's compare-exchange read the 0 of the previous
// owner's give-back (C') with acquire: the previous owner's null view happens-before my
// claim, my claim happens-before any hit that read my id (C, acquire of my release), and so
// such a hit reads my view or null, never the previous owner's (freed) one.
//
// The slow path, per (instance, type), runs the policy with no lock held, then adds the view
// under the lock unless a racing thread of the instance added one first (then it keeps that
// one and drops its own).
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/internal/dispatch_cache_state.hpp"
#include "palrt/pal/fork.hpp"

namespace palrt::interop {

namespace detail {
constinit thread_local dispatch_lookup_counts dispatch_lookups;
}  // namespace detail

namespace {

std::uint64_t next_cache_id() noexcept {
  // relaxed: only uniqueness matters, which the read-modify-write gives in any order.
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

exposed_interfaces::exposed_interfaces(const internal::dispatch_key&, const dispatch_table& table,
                                       std::vector<interface_vtable> exposed, std::uint64_t cache_id)
    : table_(&table), entries_(std::move(exposed)), cache_id_(cache_id) {}

dispatch_cache::dispatch_cache(dispatch_policy policy)
    : id_(next_cache_id()), state_(std::make_unique<internal::dispatch_cache_state>(policy)) {}

dispatch_cache::~dispatch_cache() {
  for (const type_descriptor* type : state_->l1_claimed) {
    detail::type_dispatch_state& l1 = type->palrt_state;
    // relaxed: ordered before the release below (C').
    l1.l1_view.store(nullptr, std::memory_order_relaxed);
    // (C') release: the null view before the free slot; the next claim acquires it (C'').
    l1.l1_owner.store(0, std::memory_order_release);
  }
  // The views are freed with state_, after every slot that pointed at one was given back.
}

const dispatch_policy& dispatch_cache::policy() const noexcept { return state_->policy; }

const exposed_interfaces& dispatch_cache::interfaces_for_slow(const type_descriptor& type) {
  ++detail::dispatch_lookups.fallback_lookups;
  internal::dispatch_cache_state& s = *state_;
  detail::type_dispatch_state& l1 = type.palrt_state;

  const exposed_interfaces* view = s.views_by_type.find(type);
  // relaxed: a hint only; the claim below decides, under the lock, by compare-exchange.
  const bool l1_free = l1.l1_owner.load(std::memory_order_relaxed) == 0;
  if (view && !l1_free) return *view;  // another instance holds the L1: the map is our L1
  if (s.made.forked()) {
    // A fork()ed child: what follows takes `writer`. The views this instance kept still serve.
    if (view) return *view;
    throw pal::forked_child_error("dispatch_cache::interfaces_for");
  }

  std::unique_ptr<exposed_interfaces> built;
  if (!view) {
    // No lock held: dispatch_table_for may build (and throw), the policy is host code.
    const dispatch_table& table = dispatch_table_for(type);
    std::vector<interface_vtable> exposed;
    exposed.reserve(table.interfaces().size());
    for (const interface_vtable& entry : table.interfaces())
      if (!s.policy.expose || s.policy.expose(s.policy.context, type, *entry.descriptor)) exposed.push_back(entry);
    built = std::make_unique<exposed_interfaces>(internal::dispatch_key{}, table, std::move(exposed), id_);
  }

  std::lock_guard guard(s.writer);
  if (built) {
    view = s.views_by_type.find(type);  // a racing thread of this instance may have kept one
    if (view) {
      s.views_discarded.fetch_add(1, std::memory_order_relaxed);
    } else {
      s.views.reserve(s.views.size() + 1);  // so that keeping the view cannot throw...
      s.views_by_type.insert(*built);       // ...once the map holds it (insert may throw)
      view = built.get();
      s.views.push_back(std::move(built));
      s.views_built.fetch_add(1, std::memory_order_relaxed);
    }
  }
  s.l1_claimed.reserve(s.l1_claimed.size() + 1);  // so that recording a claim cannot throw
  std::uint64_t expected = 0;
  // (C'') acq_rel: acquire the previous owner's give-back (C'); release to this instance's
  // hits (C), which then see no view older than the null stored at the give-back.
  if (l1.l1_owner.compare_exchange_strong(expected, id_, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    s.l1_claimed.push_back(&type);
    s.l1_claims.fetch_add(1, std::memory_order_relaxed);
    // release: the view's contents before its address (acquire in interfaces_for).
    l1.l1_view.store(view, std::memory_order_release);
  }
  return *view;
}

}  // namespace palrt::interop

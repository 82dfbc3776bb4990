// SPDX-License-Identifier: MIT
// wrapper_record: a cached wrapper's record, and how it leaves its cache.
#include <atomic>

#include "palrt/interop/identity_cache.hpp"
#include "palrt/interop/internal/cache_state.hpp"
#include "palrt/interop/internal/weak_object_table.hpp"

namespace palrt::interop {

wrapper_record::wrapper_record(const internal::record_key&, const void* identity, gc::owned_handle handle,
                               std::shared_ptr<internal::cache_state> cache) noexcept
    : identity_(identity), handle_(std::move(handle)), cache_id_(cache->id), cache_(std::move(cache)) {}

// The wrapper died: its field or the side table dropped this record. The entry goes first
// and the handle after, so that no entry ever holds a freed handle (bucket_map.cpp relies
// on it), and by exact handle, so that an entry made since for the same identity stays.
void wrapper_record::retire() noexcept {
  if (!handle_) return;
  if (cache_->map->remove(identity_, handle_.get()))
    cache_->removed.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
  if (side_table_key_) internal::record_side_table().erase(side_table_key_, this);
  handle_.reset();
  // relaxed: the hook is best effort while the cache is being destroyed (its documentation).
  if (linked_ && cache_->options.on_removed && cache_->open.load(std::memory_order_relaxed))
    cache_->options.on_removed(cache_->options.on_removed_context, identity_);
}

void wrapper_record::finalize() { retire(); }

wrapper_record::~wrapper_record() { retire(); }

gc::ref<wrapper_record> detail::record_in_fields(const wrapper_object& wrapper) {
  // acquire: the record was initialised before it was published (compare-exchange).
  wrapper_record* r =
      detail::wrapper_access::record(const_cast<wrapper_object&>(wrapper)).load(std::memory_order_acquire);
  if (!r) return {};
  // The field holds a reference for as long as the wrapper lives, and the caller holds it.
  gc::detail::object_access::add_ref(*r);
  return gc::ref<wrapper_record>::adopt(r);
}

gc::ref<wrapper_record> detail::record_of_object(const gc::object& wrapper) {
  if (auto* slots = dynamic_cast<const wrapper_object*>(&wrapper)) return record_in_fields(*slots);
  return gc::static_ref_cast<wrapper_record>(internal::record_side_table().find(wrapper));
}

wrapper_object::~wrapper_object() {
  // relaxed: the object is being freed; nobody else reads its fields any more.
  if (wrapper_record* r = record_.load(std::memory_order_relaxed)) gc::detail::object_access::release(*r);
  if (gc::object* o = outbound_.load(std::memory_order_relaxed)) gc::detail::object_access::release(*o);
}

}  // namespace palrt::interop

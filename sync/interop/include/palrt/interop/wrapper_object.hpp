// SPDX-License-Identifier: MIT
// palrt::interop::wrapper_object: two fields a host's wrapper type may carry so that the
// interop caches find what they need on the object itself instead of in a side table.
//
// Example:
//   struct com_proxy : palrt::gc::object, palrt::interop::wrapper_object { /* ... */ };
//   struct managed_thing : palrt::gc::finalizable, palrt::interop::wrapper_object { /* ... */ };
//
// It is a mixin, not an object: the host's type derives from palrt::gc::object (or
// finalizable) as well, and the caches see the mixin through the static type they are
// handed (get_or_create's factory result, get_or_create_outbound's argument), so using it
// costs no virtual call and no dynamic_cast.
//
// - The wrapper record field: when the object is an inbound wrapper (the proxy for a native
//   identity, identity_cache::get_or_create), its wrapper_record (identity_cache.hpp). It is
//   published once, by compare-exchange, under the cache's bucket lock: the first
//   registration wins and every caller gets the winner; it never changes afterwards. It
//   holds a reference to the record, so the record lives exactly as long as the wrapper,
//   finalization included: a wrapper whose finalizer resurrects it keeps its record, whose
//   weak-long handle still leads to it, so it is still the cached wrapper of its identity
//   (identity_cache.hpp, "Resurrection").
// - The outbound wrapper field: the wrapper native code sees for this object
//   (identity_cache::get_or_create_outbound), tagged with the id of the cache that made it.
//   Only the first cache to publish one uses the field; other caches keep theirs in their
//   own side table. The tag is a number, not a pointer, because a wrapper may outlive the
//   cache that made it (ids are never reused in a process).
// Objects without the mixin get the same contracts, resurrection included, through side
// tables keyed weakly on the object (dependent handles, which a collection clears only once
// the object is dead after finalization): a dynamic_cast that fails, then a hash lookup under
// one of the side table's shard locks, on every record_of() and outbound lookup.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstdint>

namespace palrt::gc {
class object;
}

namespace palrt::interop {

class wrapper_record;
namespace detail {
class wrapper_access;
}

class wrapper_object {
 public:
  wrapper_object(const wrapper_object&) = delete;
  wrapper_object& operator=(const wrapper_object&) = delete;

 protected:
  wrapper_object() noexcept = default;
  // Drops the references the fields hold (runs when the collector frees the object).
  ~wrapper_object();

 private:
  friend class detail::wrapper_access;
  std::atomic<wrapper_record*> record_{nullptr};
  // Written once, under the owning cache's lock: the id first, then the wrapper (release).
  std::atomic<std::uint64_t> outbound_cache_id_{0};
  std::atomic<gc::object*> outbound_{nullptr};
};

namespace detail {
// The caches' access to the fields (identity_cache.hpp, identity_cache.cpp).
class wrapper_access {
 public:
  static std::atomic<wrapper_record*>& record(wrapper_object& w) noexcept { return w.record_; }
  static std::atomic<std::uint64_t>& outbound_cache_id(wrapper_object& w) noexcept { return w.outbound_cache_id_; }
  static std::atomic<gc::object*>& outbound(wrapper_object& w) noexcept { return w.outbound_; }
  static const std::atomic<std::uint64_t>& outbound_cache_id(const wrapper_object& w) noexcept {
    return w.outbound_cache_id_;
  }
  static const std::atomic<gc::object*>& outbound(const wrapper_object& w) noexcept { return w.outbound_; }
};
}  // namespace detail

}  // namespace palrt::interop

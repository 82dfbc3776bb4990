// SPDX-License-Identifier: MIT
// palrt::boehm::identity_cache: the identity cache's host mode for wrappers that are Boehm
// objects (native identity -> a GC_MALLOC'd wrapper). The cache holds its wrappers weakly
// (palrt's tables are malloc memory, which Boehm does not scan): an entry lives until its
// wrapper is found unmarked, when the collector_binding it was added to sweeps it at
// GC_EVENT_MARK_END with the world stopped, before the world runs again, so a hit never hands
// out a wrapper Boehm has found dead. A host that frees a wrapper itself (GC_FREE) erases its
// token first.
//
// The pointer is the reference: try_acquire() takes nothing and release() drops nothing
// (a wrapper a caller holds is kept by Boehm's scan of that caller's stack and registers).
// grace_period reclamation: hits from any thread, no lock, no shared write.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include "palrt/interop/host_identity_cache.hpp"

namespace palrt::boehm {

struct object_policy {
  static constexpr interop::host_reclamation reclamation = interop::host_reclamation::grace_period;
  static bool try_acquire(void*) noexcept { return true; }
  static void release(void*) noexcept {}
};

using identity_cache = interop::host_identity_cache<object_policy>;

}  // namespace palrt::boehm

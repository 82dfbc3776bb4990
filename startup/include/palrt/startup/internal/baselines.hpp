// SPDX-License-Identifier: MIT
// The baselines palrt measures itself against, for palrt's own tools (palrt-startup,
// palrt-bench) and tests; never installed, so no host can pick one by mistake. Each is a way
// to do it worse, kept so that a benchmark can print palrt beside it:
//
//   startup orders     registered-first is what bootstrap() does: register for membarrier
//                      while the process has one thread (the kernel's fast path, ~1 us),
//                      then start the service threads. threads-first starts the service
//                      threads, then registers: CoreCLR's order before the fix; the kernel
//                      then waits an RCU grace period, ~16 ms on 2-core machines.
//                      no-membarrier never registers: the process barrier falls back to
//                      mprotect or signals.
//   registration       whether start_thread() registers before the first thread (the policy
//   policies           under the orders above; palrt/pal/internal/registration_policy.hpp).
//   cache designs      the identity cache's lock-based designs (bucketed reader-writer locks,
//                      one lock, pybind11's sharded map) beside palrt's lock-free hit path
//                      (palrt/interop/internal/cache_design.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "palrt/interop/internal/cache_design.hpp"
#include "palrt/pal/internal/registration_policy.hpp"
#include "palrt/startup/bootstrap.hpp"

namespace palrt::startup::internal {

enum class ordering : unsigned char { registered_first, threads_first, no_membarrier };

// "registered-first", "threads-first", "no-membarrier"
std::string_view to_string(ordering o) noexcept;
std::optional<ordering> parse_ordering(std::string_view name) noexcept;

// bootstrap(opts), in the order given (registered_first is bootstrap() itself).
class runtime_access {
 public:
  static std::unique_ptr<runtime> bootstrap(const options& opts, ordering order);
};

}  // namespace palrt::startup::internal

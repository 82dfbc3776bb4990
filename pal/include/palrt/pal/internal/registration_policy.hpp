// SPDX-License-Identifier: MIT
// Benchmark baselines only (never installed; palrt/startup/internal/baselines.hpp gathers
// them): whether start_thread() registers for membarrier before the first thread. A host
// always wants the default; the other two reproduce the orders palrt measures itself
// against: `deferred` (the host registers later, after its threads: CoreCLR's order before
// the fix) and `never` (no membarrier at all).
#pragma once

namespace palrt::pal::internal {

enum class registration_policy {
  before_first_thread,  // default: register (if not yet) before starting any thread
  deferred,             // the host registers itself later (threads-first ordering)
  never,                // never register (no-membarrier ordering)
};

// Process-wide; set it before the first start_thread(). Returns the previous policy.
registration_policy set_registration_policy(registration_policy p) noexcept;
registration_policy current_registration_policy() noexcept;

}  // namespace palrt::pal::internal

// SPDX-License-Identifier: MIT
// Spin-then-park for the sync manager's two waits: the worker waiting for its next item and
// an invoke() caller waiting for its result.
//
// Why spin at all: on a virtual machine a futex wake of a sleeping thread costs tens of
// microseconds (the idle vCPU has to be woken by the hypervisor), while the other side of a
// hot invoke round trip answers within a microsecond. Why bound it: an idle process must stay
// idle, so a waiter whose partner does not answer within the bound parks and uses no CPU.
//
// The bound adapts, the way folly's Baton and Go's scheduler keep spinning cheap: each waiter
// keeps a budget between min_ns and max_ns (sync_manager::max_spin, the public bound). After a
// wait it looks at how long the wait really took: if that was within max_ns, spinning that
// long (twice, for margin) would have avoided the park, so the budget moves there; if it took
// longer, spinning did not help and the budget halves. A waiter whose partner answers fast
// spins up to the bound; one whose partner sleeps drops to min_ns of spinning per wait.
// For this to recover from a cold start (both sides parked, each wait a partner's wake-up),
// the bound must be longer than a wake-up: then the long wait still counts as "spinning would
// have caught it", the next spin covers the partner's wake-up, and the round trips turn hot.
//
// With one CPU online a spin never pays (the partner cannot run while we spin, unless we are
// preempted): the budget is then zero and every wait parks at once, as Go's scheduler does.
//
// Not thread-safe: one per waiter (the worker's loop, each invoke context).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "palrt/core/clock.h"
#include "palrt/pal/cpu.hpp"
#include "palrt/pal/internal/cpu_relax.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::sync::internal {

using pal::internal::cpu_relax;

class adaptive_spin {
 public:
  static constexpr std::int64_t max_ns = std::chrono::nanoseconds(sync_manager::max_spin).count();
  static constexpr std::int64_t min_ns = 500;

  // Spins until ready() holds (true) or the budget is spent (false). Starts the wait's clock:
  // after a false, the caller parks and then calls parked().
  adaptive_spin() noexcept : most_ns_(spinning_pays() ? max_ns : 0), budget_ns_(most_ns_) {}

  template <class Ready>
  bool spin(Ready&& ready) noexcept {
    start_ns_ = palrt_monotonic_ns();
    if (most_ns_ == 0) return ready();  // one CPU: one look, then park
    const std::int64_t deadline = start_ns_ + budget_ns_;
    for (unsigned i = 1;; ++i) {
      if (ready()) {
        // It paid: let the next wait spin longer, up to the bound.
        budget_ns_ = std::min(most_ns_, 2 * budget_ns_);
        return true;
      }
      // Pauses between looks, doubling from 1 to max_pauses_per_look: each look reads a line
      // the other side writes, and taking it from that side's cache too often slows the very
      // writer we wait for. An answer that comes at once is seen at once; one that comes later
      // is seen within a few hundred nanoseconds (64 pauses).
      const unsigned pauses = i < 7 ? 1u << (i - 1) : max_pauses_per_look;
      for (unsigned p = 0; p < pauses; ++p) cpu_relax();
      // The clock (a vDSO read, ~20 ns) every 8 looks: the bound overshoots by < 1 us.
      if (i % 8 == 0 && palrt_monotonic_ns() >= deadline) return false;
    }
  }
  // After a failed spin and the park that followed: adapts the budget to the whole wait.
  void parked() noexcept {
    const std::int64_t waited = palrt_monotonic_ns() - start_ns_;
    budget_ns_ = waited <= max_ns ? std::clamp(2 * waited, min_ns, max_ns) : std::max(min_ns, budget_ns_ / 2);
    budget_ns_ = std::min(budget_ns_, most_ns_);
  }

  std::int64_t budget_ns() const noexcept { return budget_ns_; }

 private:
  static constexpr unsigned max_pauses_per_look = 64;
  // Online CPUs, not this thread's affinity: a worker pinned to one CPU still has a partner
  // running on another. Read once per process (sysconf reads /sys).
  static bool spinning_pays() noexcept {
    static const bool pays = pal::online_cpus() > 1;
    return pays;
  }
  std::int64_t most_ns_;  // max_ns, or 0 with one CPU
  std::int64_t budget_ns_;
  std::int64_t start_ns_ = 0;
};

}  // namespace palrt::sync::internal

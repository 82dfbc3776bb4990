// SPDX-License-Identifier: MIT
// Where benchmark threads run.
//
// The measuring thread stays on one CPU and the load threads go on the others, so a variant's
// time is its own operation, not the measuring thread being scheduled out for a load thread,
// and so cross-CPU work (IPIs, cache-line transfers) is what is measured. Pinning is best
// effort: with one allowed CPU, or if the kernel refuses, threads run where the scheduler puts
// them and the numbers say so by being worse, not by the tool failing.
#pragma once

#include <optional>
#include <vector>

#include <sched.h>
#include <sys/types.h>

namespace palrt::bench {

// The CPUs the calling thread may run on (its affinity mask), ascending.
std::vector<int> allowed_cpus();

// Restricts the calling thread to `cpu`. False if the kernel refused.
bool pin_current_thread(int cpu) noexcept;
// Restricts the thread `tid` of this process (a kernel thread id) to `cpu`: for threads the
// library starts, which a benchmark cannot pin from inside. False if the kernel refused.
bool pin_thread(pid_t tid, int cpu) noexcept;

// Which CPU measures and which CPUs carry load.
struct cpu_plan {
  std::optional<int> measuring_cpu;  // empty: fewer than two CPUs allowed, nothing is pinned
  std::vector<int> load_cpus;        // the other allowed CPUs; load thread i goes on [i % size]
};

// Measures on the CPU the calling thread is on now (where the scheduler already put it) and
// loads the others.
cpu_plan plan_cpus();

// How many CPUs a run's threads occupy when thread i was put on assigned[i]: the distinct
// CPUs among those; where not every thread could be pinned, as many as the scheduler can give
// them, min(threads, available); one where nothing was assigned (fewer than two CPUs allowed:
// nothing is pinned). What a run's CPU-timed twin divides by (bench_timing.hpp).
int cpus_occupied(const std::vector<int>& assigned, bool all_pinned, int available);

// Restores the calling thread's affinity mask when it goes out of scope, so pinning the
// measuring thread for one component does not leak into the next.
class affinity_guard {
 public:
  affinity_guard() noexcept;
  ~affinity_guard();
  affinity_guard(const affinity_guard&) = delete;
  affinity_guard& operator=(const affinity_guard&) = delete;

 private:
  cpu_set_t saved_;
  bool valid_ = false;
};

}  // namespace palrt::bench

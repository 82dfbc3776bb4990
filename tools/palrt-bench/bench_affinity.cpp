// SPDX-License-Identifier: MIT
#include "bench_affinity.hpp"

#include <algorithm>

namespace palrt::bench {

// cpu_set_t covers CPUs 0..1023 (CPU_SETSIZE); benchmark machines have far fewer.

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

bool pin_current_thread(int cpu) noexcept { return pin_thread(0, cpu); }

bool pin_thread(pid_t tid, int cpu) noexcept {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(tid, sizeof set, &set) == 0;
}

cpu_plan plan_cpus() {
  cpu_plan plan;
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) return plan;
  const int current = sched_getcpu();
  const bool current_allowed = std::find(cpus.begin(), cpus.end(), current) != cpus.end();
  plan.measuring_cpu = current_allowed ? current : cpus.front();
  for (int cpu : cpus) {
    if (cpu != *plan.measuring_cpu) plan.load_cpus.push_back(cpu);
  }
  return plan;
}

int cpus_occupied(const std::vector<int>& assigned, bool all_pinned, int available) {
  if (assigned.empty()) return 1;
  if (!all_pinned) return std::max(1, std::min(static_cast<int>(assigned.size()), available));
  std::vector<int> distinct;
  for (const int cpu : assigned) {
    if (std::find(distinct.begin(), distinct.end(), cpu) == distinct.end()) distinct.push_back(cpu);
  }
  return static_cast<int>(distinct.size());
}

affinity_guard::affinity_guard() noexcept {
  CPU_ZERO(&saved_);
  valid_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
}

affinity_guard::~affinity_guard() {
  if (valid_) sched_setaffinity(0, sizeof saved_, &saved_);
}

}  // namespace palrt::bench

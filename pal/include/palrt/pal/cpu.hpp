// CPU counts as a runtime should size itself by.
//
// processor_count() is what a runtime should size per-processor structures and worker pools
// by: the CPUs in this thread's affinity mask, further limited by a cgroup v2 `cpu.max`
// quota (rounded up), never less than 1. online_cpus() is the kernel's online set, which
// decides the membarrier fast path (one online CPU also takes it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace palrt::pal {

struct cgroup_cpu_limit {
  std::string path;            // the cpu.max file read
  std::int64_t quota_us = -1;  // -1 = "max" (no limit)
  std::int64_t period_us = 0;
};

int processor_count() noexcept;
int affinity_cpus() noexcept;
int online_cpus() noexcept;
// The cgroup v2 cpu.max of this process's cgroup, if the file exists and parses.
std::optional<cgroup_cpu_limit> cgroup_cpu_max();

// The pieces processor_count() is made of, for callers with their own inputs (and tests):
// a cpu.max file's text ("<quota|max> <period>"), nullopt when malformed; and the count
// for `usable_cpus` under `limit`.
std::optional<cgroup_cpu_limit> parse_cgroup_cpu_max(std::string_view text);
int processor_count(int usable_cpus, const std::optional<cgroup_cpu_limit>& limit) noexcept;

}  // namespace palrt::pal

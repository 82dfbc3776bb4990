// SPDX-License-Identifier: MIT
// CPU counts as a runtime should size itself by.
//
// processor_count() is what a runtime should size per-processor structures and worker pools
// by: the CPUs in this thread's affinity mask, further limited by the tightest cgroup v2
// `cpu.max` quota on the path from this process's cgroup up to the root (rounded up, as the
// JDK and .NET do: a parent's quota limits every child), never less than 1. online_cpus()
// is the kernel's online set, which decides the membarrier fast path (one online CPU also
// takes it). current_cpu() is where the calling thread runs now, a hint for per-CPU
// structures, and cpu_id_bound() how many CPU ids such a structure needs. None of these throws.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstdint>
#include <optional>
#include <string>

namespace palrt::pal {

struct cgroup_cpu_limit {
  std::string path;            // the cpu.max file that holds the limit
  std::int64_t quota_us = -1;  // -1 = "max" (no limit)
  std::int64_t period_us = 0;
};

// At least 1. Falls back to online_cpus() when the affinity mask cannot be read, and ignores
// a cgroup limit it cannot read or parse.
int processor_count() noexcept;
// CPUs in this thread's affinity mask; 0 when sched_getaffinity fails (a seccomp filter may
// deny it), which processor_count() treats as "unknown".
int affinity_cpus() noexcept;
// CPUs online (sysconf(_SC_NPROCESSORS_ONLN), the kernel's /sys/devices/system/cpu/online);
// 1 when the kernel cannot say.
int online_cpus() noexcept;
// The tightest cgroup v2 cpu.max limit between this process's cgroup and the root: the one
// allowing the fewest CPUs. nullopt when there is no cgroup v2 hierarchy, no cpu controller,
// no cpu.max file on the path, or none parses. A path where every cpu.max says "max" gives
// the process's own file with quota_us = -1.
std::optional<cgroup_cpu_limit> cgroup_cpu_max() noexcept;
// The CPU the calling thread runs on (sched_getcpu: the vDSO or the rseq area, no system call
// on the common kernels), 0 when the kernel cannot say. A hint only: the thread may run
// elsewhere by the time it is used, so a per-CPU structure indexed by it must be correct for
// any thread on any index, and gains locality, not safety, from it.
int current_cpu() noexcept;
// One more than the highest online CPU id: how many entries a per-CPU array indexed by
// current_cpu() needs, for every thread of the process whatever its affinity mask (a
// structure sized by the mask of the thread that made it would give a table made by a
// thread pinned to CPU 0 one shard for every CPU). Read from /sys/devices/system/cpu/online
// once per process and kept (a CPU brought online later shares an entry: index modulo the
// size); the first sysfs read of a process costs tens of microseconds, so a structure made at
// startup sizes itself on first use, not when made. When the file cannot be read (no /sys, a
// seccomp filter), the calling thread's affinity mask decides, and 1 if that fails too.
int cpu_id_bound() noexcept;

}  // namespace palrt::pal

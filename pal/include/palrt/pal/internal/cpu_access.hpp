// SPDX-License-Identifier: MIT
// The pieces processor_count() is made of, for tests that feed it their own inputs (cgroup
// trees built in a temporary folder, cpu.max texts the kernel writes).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "palrt/pal/cpu.hpp"

namespace palrt::pal::internal {

class cpu_access {
 public:
  // A cpu.max file's text ("<quota|max> <period>\n"); nullopt when malformed.
  static std::optional<cgroup_cpu_limit> parse_cgroup_cpu_max(std::string_view text);
  // The count for `usable_cpus` under `limit` (at least 1, rounded up).
  static int processor_count(int usable_cpus, const std::optional<cgroup_cpu_limit>& limit) noexcept;
  // cgroup_cpu_max() for the cgroup `cgroup_path` ("/a/b", as /proc/self/cgroup's "0::"
  // line names it) in a v2 hierarchy mounted at `mount`.
  static std::optional<cgroup_cpu_limit> tightest_cpu_max(const std::string& mount, const std::string& cgroup_path);
};

}  // namespace palrt::pal::internal

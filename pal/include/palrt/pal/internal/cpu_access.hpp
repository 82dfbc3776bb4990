// SPDX-License-Identifier: MIT
// The pieces processor_count() and cpu_id_bound() are made of, for tests that feed them their
// own inputs (cgroup trees built in a temporary folder, cpu.max and CPU list texts the
// kernel writes, a missing file).
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
  // One more than the highest id in a kernel CPU list ("0-3,8,10-11\n", as sysfs's online
  // file holds it); nullopt when the text is no such list.
  static std::optional<int> cpu_list_bound(std::string_view text);
  // cpu_id_bound() with the online list read from `online_file`, and no caching.
  static int cpu_id_bound_from(const char* online_file) noexcept;
};

}  // namespace palrt::pal::internal

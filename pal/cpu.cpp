// SPDX-License-Identifier: MIT
#include "palrt/pal/cpu.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

#include "palrt/pal/internal/cpu_access.hpp"

namespace palrt::pal {
namespace {

using internal::cpu_access;

// CPUs a limit allows, rounded up: a quota of 1.5 periods lets 2 threads run part-time, as
// CoreCLR and the JDK count it.
std::int64_t cpus_allowed(const cgroup_cpu_limit& limit) {
  if (limit.quota_us <= 0 || limit.period_us <= 0) return INT64_MAX;
  return std::max<std::int64_t>((limit.quota_us + limit.period_us - 1) / limit.period_us, 1);
}

std::optional<cgroup_cpu_limit> read_cpu_max(const std::string& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto limit = cpu_access::parse_cgroup_cpu_max(content);
  if (limit) limit->path = file;
  return limit;
}

}  // namespace

int affinity_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int online_cpus() noexcept {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::optional<cgroup_cpu_limit> cgroup_cpu_max() noexcept {
  try {
    // cgroup v2: the "0::<path>" line of /proc/self/cgroup names our cgroup. The v2 tree is
    // mounted at /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid hosts).
    std::ifstream in("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(in, line))
      if (line.rfind("0::", 0) == 0) path = line.substr(3);
    if (path.empty()) return std::nullopt;
    for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
      if (auto limit = cpu_access::tightest_cpu_max(mount, path)) return limit;
  } catch (...) {
    // bad_alloc reading a procfs line: no limit we can honour.
  }
  return std::nullopt;
}

int processor_count() noexcept {
  int n = affinity_cpus();
  if (n <= 0) n = online_cpus();
  return cpu_access::processor_count(n, cgroup_cpu_max());
}

int current_cpu() noexcept {
  const int cpu = sched_getcpu();
  return cpu >= 0 ? cpu : 0;
}

int cpu_id_bound() noexcept {
  // relaxed: any thread computes the same value; a race reads the file twice.
  static std::atomic<int> cached{0};
  int bound = cached.load(std::memory_order_relaxed);
  if (bound == 0) {
    bound = cpu_access::cpu_id_bound_from("/sys/devices/system/cpu/online");
    cached.store(bound, std::memory_order_relaxed);
  }
  return bound;
}

namespace internal {

std::optional<cgroup_cpu_limit> cpu_access::parse_cgroup_cpu_max(std::string_view text) {
  // "<quota> <period>\n", quota "max" for no limit (cgroup v2, Documentation/admin-guide/cgroup-v2.rst).
  std::istringstream in{std::string(text)};
  std::string quota;
  std::int64_t period = 0;
  if (!(in >> quota >> period) || period <= 0) return std::nullopt;
  cgroup_cpu_limit limit;
  limit.period_us = period;
  if (quota == "max") return limit;
  try {
    std::size_t used = 0;
    limit.quota_us = std::stoll(quota, &used);
    if (used != quota.size() || limit.quota_us <= 0) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  return limit;
}

int cpu_access::processor_count(int usable_cpus, const std::optional<cgroup_cpu_limit>& limit) noexcept {
  std::int64_t n = std::max(usable_cpus, 1);
  if (limit) n = std::min(n, cpus_allowed(*limit));
  return static_cast<int>(n);
}

std::optional<cgroup_cpu_limit> cpu_access::tightest_cpu_max(const std::string& mount, const std::string& cgroup_path) {
  // A parent's quota caps the whole subtree, so the limit in force is the tightest on the
  // way up. The root cgroup has no cpu.max; a level without the cpu controller has none either.
  std::optional<cgroup_cpu_limit> tightest;
  std::string path = cgroup_path == "/" ? std::string() : cgroup_path;
  for (;;) {
    if (auto limit = read_cpu_max(mount + path + "/cpu.max")) {
      if (!tightest || cpus_allowed(*limit) < cpus_allowed(*tightest)) tightest = limit;
    }
    if (path.empty()) break;
    const auto slash = path.rfind('/');
    path.erase(slash == std::string::npos ? 0 : slash);
  }
  return tightest;
}

std::optional<int> cpu_access::cpu_list_bound(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  int bound = 0;
  // Ranges "a-b" and single ids "a", separated by commas.
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const auto number = [](std::string_view digits) -> std::optional<int> {
      if (digits.empty() || digits.size() > 6) return std::nullopt;
      int n = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + (c - '0');
      }
      return n;
    };
    const auto first = number(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : number(item.substr(dash + 1));
    if (!first || !last || *last < *first) return std::nullopt;
    bound = std::max(bound, *last + 1);
  }
  return bound;
}

int cpu_access::cpu_id_bound_from(const char* online_file) noexcept {
  // Not iostreams: this runs on a handle table's first overflow, maybe in a small thread.
  if (const int fd = ::open(online_file, O_RDONLY | O_CLOEXEC); fd >= 0) {
    char text[4096];  // "0-4095" is 7 bytes; only a list with thousands of holes is longer
    const ssize_t n = ::read(fd, text, sizeof text);
    ::close(fd);
    if (n > 0 && static_cast<std::size_t>(n) < sizeof text) {  // a full buffer may be cut short
      if (const auto bound = cpu_list_bound(std::string_view(text, static_cast<std::size_t>(n)))) return *bound;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int bound = 1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) bound = cpu + 1;
  return bound;
}

}  // namespace internal

}  // namespace palrt::pal

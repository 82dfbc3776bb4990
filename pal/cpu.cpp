#include "palrt/pal/cpu.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

namespace palrt::pal {
namespace {

// "0-3,5,7-8" -> 7. Returns 0 if the text does not parse.
int count_cpu_list(std::string_view list) {
  int total = 0;
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view range = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    while (!range.empty() && (range.back() == '\n' || range.back() == ' ')) range.remove_suffix(1);
    if (range.empty()) continue;
    int lo = 0, hi = 0;
    auto dash = range.find('-');
    try {
      lo = std::stoi(std::string(range.substr(0, dash)));
      hi = dash == std::string_view::npos ? lo : std::stoi(std::string(range.substr(dash + 1)));
    } catch (...) {
      return 0;
    }
    if (hi < lo) return 0;
    total += hi - lo + 1;
  }
  return total;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

int affinity_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int online_cpus() noexcept {
  try {
    int n = count_cpu_list(read_first_line("/sys/devices/system/cpu/online"));
    if (n > 0) return n;
  } catch (...) {
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::optional<cgroup_cpu_limit> parse_cgroup_cpu_max(std::string_view text) {
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

std::optional<cgroup_cpu_limit> cgroup_cpu_max() {
  // cgroup v2: the "0::<path>" line of /proc/self/cgroup names our cgroup. The v2 tree is
  // mounted at /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid hosts).
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return std::nullopt;
  if (path == "/") path.clear();
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    std::string file = std::string(root) + path + "/cpu.max";
    std::ifstream max(file);
    if (!max) continue;
    std::string content((std::istreambuf_iterator<char>(max)), std::istreambuf_iterator<char>());
    if (auto limit = parse_cgroup_cpu_max(content)) {
      limit->path = file;
      return limit;
    }
  }
  return std::nullopt;
}

int processor_count(int usable_cpus, const std::optional<cgroup_cpu_limit>& limit) noexcept {
  int n = usable_cpus;
  if (limit && limit->quota_us > 0 && limit->period_us > 0) {
    // A quota of 1.5 periods lets 2 threads run part-time: round up, as CoreCLR does.
    auto by_quota = static_cast<int>((limit->quota_us + limit->period_us - 1) / limit->period_us);
    n = std::min(n, std::max(by_quota, 1));
  }
  return std::max(n, 1);
}

int processor_count() noexcept {
  int n = affinity_cpus();
  if (n <= 0) n = online_cpus();
  try {
    return processor_count(n, cgroup_cpu_max());
  } catch (...) {
    return processor_count(n, std::nullopt);  // an unreadable cpu.max is no limit we can honour
  }
}

}  // namespace palrt::pal

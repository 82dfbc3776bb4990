// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "palrt/pal/cpu.hpp"
#include "palrt/pal/internal/cpu_access.hpp"

using namespace palrt;
using cpu = palrt::pal::internal::cpu_access;

TEST_CASE("cpu: processor_count honours the affinity mask") {
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  const int all = pal::processor_count();
  CHECK(all >= 1);
  CHECK(all <= pal::online_cpus());
  CHECK(pal::affinity_cpus() == CPU_COUNT(&saved));

  // Restrict this thread to one CPU: the count must follow.
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  CHECK(pal::processor_count() == 1);
  CHECK(pal::affinity_cpus() == 1);
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK(pal::processor_count() == all);
}

TEST_CASE("cpu: current_cpu names the CPU a thread pinned to one runs on, for each CPU of its mask") {
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int pinned = 0;
  for (int c = 0; c < CPU_SETSIZE && pinned < 4; ++c) {
    if (!CPU_ISSET(c, &saved)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);  // the kernel moves the thread before returning
    CHECK(pal::current_cpu() == c);
    ++pinned;
  }
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK(pinned >= 1);
}

TEST_CASE("cpu: online_cpus matches the kernel's count") {
  CHECK(pal::online_cpus() == static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST_CASE("cpu: a cgroup v2 cpu.max, when present, is parsed and bounds the count") {
  auto limit = pal::cgroup_cpu_max();
  if (!limit) {
    MESSAGE("no cgroup v2 cpu.max for this process; nothing to check");
    return;
  }
  CHECK(limit->period_us > 0);
  if (limit->quota_us > 0) CHECK(pal::processor_count() <= (limit->quota_us + limit->period_us - 1) / limit->period_us);
}

TEST_CASE("cpu: cpu.max parses as the kernel writes it, and a quota rounds up to whole CPUs") {
  auto unlimited = cpu::parse_cgroup_cpu_max("max 100000\n");
  REQUIRE(unlimited);
  CHECK(unlimited->quota_us == -1);
  CHECK(unlimited->period_us == 100000);
  CHECK(cpu::processor_count(8, unlimited) == 8);

  auto one_and_a_half = cpu::parse_cgroup_cpu_max("150000 100000\n");
  REQUIRE(one_and_a_half);
  CHECK(one_and_a_half->quota_us == 150000);
  CHECK(cpu::processor_count(8, one_and_a_half) == 2);                            // 1.5 CPUs of time: 2 can run
  CHECK(cpu::processor_count(1, one_and_a_half) == 1);                            // never more than the affinity allows
  CHECK(cpu::processor_count(8, cpu::parse_cgroup_cpu_max("5000 100000")) == 1);  // never 0

  for (const char* bad : {"", "max", "100000", "abc 100000", "100000 0", "-5 100000", "12x 100000"}) {
    CAPTURE(bad);
    CHECK_FALSE(cpu::parse_cgroup_cpu_max(bad));
  }
}

namespace {

// A cgroup v2 tree in a temporary folder: /<mount>/<path>/cpu.max files with the given texts.
struct cgroup_tree {
  std::filesystem::path mount;
  cgroup_tree() {
    char pattern[] = "/tmp/palrt-cgroup-XXXXXX";
    mount = mkdtemp(pattern);
  }
  ~cgroup_tree() { std::filesystem::remove_all(mount); }
  void cpu_max(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(mount / path.substr(1));
    std::ofstream(mount / path.substr(1) / "cpu.max") << text;
  }
};

}  // namespace

TEST_CASE("cpu: the tightest cpu.max on the path to the root bounds the count, not only the process's own") {
  cgroup_tree tree;
  REQUIRE(!tree.mount.empty());
  // A container limited to 1 CPU whose service cgroup itself says "max" (as systemd leaves it).
  tree.cpu_max("/machine", "100000 100000\n");
  tree.cpu_max("/machine/app", "max 100000\n");
  tree.cpu_max("/machine/app/worker", "max 100000\n");
  auto limit = cpu::tightest_cpu_max(tree.mount.string(), "/machine/app/worker");
  REQUIRE(limit);
  CHECK(limit->quota_us == 100000);
  CHECK(limit->path == (tree.mount / "machine/cpu.max").string());
  CHECK(cpu::processor_count(8, limit) == 1);

  // A child tighter than its parent wins; a parent tighter than the child wins.
  tree.cpu_max("/machine/app/worker", "250000 100000\n");
  tree.cpu_max("/machine", "400000 100000\n");
  CHECK(cpu::processor_count(8, cpu::tightest_cpu_max(tree.mount.string(), "/machine/app/worker")) == 3);
  tree.cpu_max("/machine", "150000 100000\n");
  CHECK(cpu::processor_count(8, cpu::tightest_cpu_max(tree.mount.string(), "/machine/app/worker")) == 2);

  // Unlimited all the way: the process's own file, "max". No file at all: no limit.
  tree.cpu_max("/machine", "max 100000\n");
  tree.cpu_max("/machine/app/worker", "max 100000\n");
  auto none = cpu::tightest_cpu_max(tree.mount.string(), "/machine/app/worker");
  REQUIRE(none);
  CHECK(none->quota_us == -1);
  CHECK_FALSE(cpu::tightest_cpu_max(tree.mount.string(), "/elsewhere"));
  // A malformed file on the path is skipped, not taken as a limit.
  tree.cpu_max("/machine/app", "garbage\n");
  CHECK(cpu::processor_count(8, cpu::tightest_cpu_max(tree.mount.string(), "/machine/app/worker")) == 8);
}

TEST_CASE("cpu: cpu_id_bound covers every online CPU id, whatever the calling thread's mask") {
  // The kernel's list, read here the way a user would.
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string list;
  REQUIRE(std::getline(in, list));
  const auto expected = cpu::cpu_list_bound(list);
  REQUIRE(expected);
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int lowest = 0;
  while (!CPU_ISSET(lowest, &saved)) ++lowest;
  // Pinned to its lowest CPU first (the process's first call happens there): a structure made
  // by this thread still needs every id another thread may run on.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(lowest, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  CHECK(pal::cpu_id_bound() == *expected);
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK(pal::cpu_id_bound() == *expected);
}

TEST_CASE("cpu: a kernel CPU list's bound, and the thread's mask when the list cannot be read") {
  CHECK(cpu::cpu_list_bound("0\n") == 1);
  CHECK(cpu::cpu_list_bound("0-1\n") == 2);
  CHECK(cpu::cpu_list_bound("0-3,8,10-11\n") == 12);
  CHECK(cpu::cpu_list_bound("5") == 6);
  CHECK_FALSE(cpu::cpu_list_bound(""));
  CHECK_FALSE(cpu::cpu_list_bound("\n"));
  CHECK_FALSE(cpu::cpu_list_bound("0-"));
  CHECK_FALSE(cpu::cpu_list_bound("3-1"));
  CHECK_FALSE(cpu::cpu_list_bound("0,,2"));
  CHECK_FALSE(cpu::cpu_list_bound("a-b"));
  CHECK_FALSE(cpu::cpu_list_bound("99999999"));
  // No such file (no /sys): the calling thread's mask decides.
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
  int highest = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) highest = c;
  CHECK(cpu::cpu_id_bound_from("/nonexistent/palrt/online") == highest + 1);
  // A file that holds no CPU list: the same.
  const auto garbage = std::filesystem::temp_directory_path() / ("palrt-online-" + std::to_string(getpid()));
  std::ofstream(garbage) << "not a list\n";
  CHECK(cpu::cpu_id_bound_from(garbage.c_str()) == highest + 1);
  std::filesystem::remove(garbage);
}

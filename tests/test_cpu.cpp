#include <doctest/doctest.h>
#include <sched.h>

#include <thread>

#include "palrt/pal/cpu.hpp"

using namespace palrt;

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
  if (limit->quota_us > 0)
    CHECK(pal::processor_count() <= (limit->quota_us + limit->period_us - 1) / limit->period_us);
}

TEST_CASE("cpu: cpu.max parses as the kernel writes it, and a quota rounds up to whole CPUs") {
  auto unlimited = pal::parse_cgroup_cpu_max("max 100000\n");
  REQUIRE(unlimited);
  CHECK(unlimited->quota_us == -1);
  CHECK(unlimited->period_us == 100000);
  CHECK(pal::processor_count(8, unlimited) == 8);

  auto one_and_a_half = pal::parse_cgroup_cpu_max("150000 100000\n");
  REQUIRE(one_and_a_half);
  CHECK(one_and_a_half->quota_us == 150000);
  CHECK(pal::processor_count(8, one_and_a_half) == 2);  // 1.5 CPUs of time: 2 can run
  CHECK(pal::processor_count(1, one_and_a_half) == 1);  // never more than the affinity allows
  CHECK(pal::processor_count(8, pal::parse_cgroup_cpu_max("5000 100000")) == 1);  // never 0

  for (const char* bad : {"", "max", "100000", "abc 100000", "100000 0", "-5 100000", "12x 100000"}) {
    CAPTURE(bad);
    CHECK_FALSE(pal::parse_cgroup_cpu_max(bad));
  }
}

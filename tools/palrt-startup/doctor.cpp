// SPDX-License-Identifier: MIT
#include "doctor.hpp"

#include <cinttypes>
#include <fstream>
#include <string>

#include "palrt/pal/cpu.hpp"
#include "palrt/pal/internal/barrier_strategies.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/startup/preload_probe.hpp"
#include "palrt/startup/system_facts.hpp"

namespace palrt::tools {
namespace {

std::string status_field(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) {
      auto v = line.substr(std::string(field).size());
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "?";
}

}  // namespace

int run_doctor(std::FILE* out) {
  std::fprintf(out, "palrt doctor\n\nkernel              %s\n", startup::kernel_release().c_str());

  const auto query = pal::membarrier::query();
  const auto mask = static_cast<std::uint32_t>(query.value);
  if (query.ok())
    std::fprintf(out, "membarrier QUERY    0x%03" PRIx32 "\n", mask);
  else
    std::fprintf(out, "membarrier QUERY    failed: %s\n", std::string(pal::membarrier::describe(query.error)).c_str());
  for (std::uint32_t bit = 1; bit < (1u << PALRT_MB_CMD_BITS); bit <<= 1)
    std::fprintf(out, "  %-38s %s\n", std::string(pal::membarrier::command_name(bit)).c_str(),
                 (mask & bit) ? "yes" : "no");
  std::string seccomp = status_field("Seccomp:");
  std::fprintf(out, "seccomp mode        %s (%s)\n", seccomp.c_str(),
               seccomp == "0"   ? "none"
               : seccomp == "1" ? "strict"
               : seccomp == "2" ? "filter"
                                : "unknown");

  const int rcu = startup::rcu_expedited();
  std::fprintf(out, "rcu_expedited       %d%s\n", rcu,
               rcu == 1   ? "  (slow-path registration is cheap here)"
               : rcu == 0 ? "  (registration with >1 thread waits a full RCU grace period)"
                          : "");
  std::fprintf(out, "CPUs                %d usable (affinity %d, online %d)\n", pal::processor_count(),
               pal::affinity_cpus(), pal::online_cpus());
  if (auto limit = pal::cgroup_cpu_max())
    std::fprintf(out, "cgroup cpu.max      %s %" PRId64 " (%s)\n",
                 limit->quota_us < 0 ? "max" : std::to_string(limit->quota_us).c_str(), limit->period_us,
                 limit->path.c_str());
  else
    std::fprintf(out, "cgroup cpu.max      none (no cgroup v2 cpu controller for this process)\n");

  if (auto shim = startup::find_preload_shim()) {
    std::fprintf(out, "preload shim        loaded, %s\n",
                 shim->registered ? "registered this process"
                 : shim->disabled ? "disabled (PALRT_PRELOAD=0/false/no/off)"
                                  : "registration failed");
  } else {
    std::fprintf(out, "preload shim        not loaded\n");
  }

  try {
    const auto& st = pal::initialize_process_barrier();
    std::fprintf(out, "palrt would use     %s%s\n", std::string(pal::to_string(st.strategy)).c_str(),
                 st.forced ? " (forced by PALRT_BARRIER)" : "");
  } catch (const std::exception& e) {
    std::fprintf(out, "palrt would use     nothing: %s\n", e.what());
  }

  std::fprintf(out, "\nFlushProcessWriteBuffers cost (median of 5 rounds, this thread alone):\n");
  for (auto s : {pal::barrier_strategy::membarrier, pal::barrier_strategy::mprotect, pal::barrier_strategy::signal}) {
    const std::string name(pal::to_string(s));
    try {
      using access = pal::internal::process_barrier_access;
      auto b = access::make_instance(s);
      std::fprintf(out, "  %-11s %9.0f ns\n", name.c_str(), access::measure_flush_cost_ns(*b, 2000));
    } catch (const std::exception& e) {
      std::fprintf(out, "  %-11s unavailable: %s\n", name.c_str(), e.what());
    }
  }
  return 0;
}

}  // namespace palrt::tools

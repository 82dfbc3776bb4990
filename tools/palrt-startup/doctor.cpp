#include "doctor.hpp"

#include <cinttypes>
#include <fstream>
#include <string>

#include "palrt/pal/cpu.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/startup/preload_probe.hpp"
#include "palrt/startup/system_facts.hpp"

namespace palrt::tools {
namespace {

struct command_name {
  std::uint32_t bit;
  const char* name;
};
constexpr command_name membarrier_commands[] = {
    {1u << 0, "GLOBAL"},
    {1u << 1, "GLOBAL_EXPEDITED"},
    {1u << 2, "REGISTER_GLOBAL_EXPEDITED"},
    {1u << 3, "PRIVATE_EXPEDITED"},
    {1u << 4, "REGISTER_PRIVATE_EXPEDITED"},
    {1u << 5, "PRIVATE_EXPEDITED_SYNC_CORE"},
    {1u << 6, "REGISTER_PRIVATE_EXPEDITED_SYNC_CORE"},
    {1u << 7, "PRIVATE_EXPEDITED_RSEQ"},
    {1u << 8, "REGISTER_PRIVATE_EXPEDITED_RSEQ"},
    {1u << 9, "GET_REGISTRATIONS"},
};

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

  const std::uint32_t mask = pal::membarrier::supported_mask();
  std::fprintf(out, "membarrier QUERY    0x%03" PRIx32 "%s\n", mask,
               mask ? "" : "  (QUERY failed: not built in, or denied by seccomp)");
  for (const auto& c : membarrier_commands)
    std::fprintf(out, "  %-38s %s\n", c.name, (mask & c.bit) ? "yes" : "no");
  std::string seccomp = status_field("Seccomp:");
  std::fprintf(out, "seccomp mode        %s (%s)\n", seccomp.c_str(),
               seccomp == "0" ? "none" : seccomp == "1" ? "strict" : seccomp == "2" ? "filter" : "unknown");

  const int rcu = startup::rcu_expedited();
  std::fprintf(out, "rcu_expedited       %d%s\n", rcu,
               rcu == 1 ? "  (slow-path registration is cheap here)"
                        : rcu == 0 ? "  (registration with >1 thread waits a full RCU grace period)" : "");
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
                 shim->registered ? "registered this process" : shim->disabled ? "disabled (PALRT_PRELOAD=0)"
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
      auto b = pal::make_barrier_instance(s);
      std::fprintf(out, "  %-11s %9.0f ns\n", name.c_str(), pal::measure_flush_cost_ns(*b, 2000));
    } catch (const std::exception& e) {
      std::fprintf(out, "  %-11s unavailable: %s\n", name.c_str(), e.what());
    }
  }
  return 0;
}

}  // namespace palrt::tools

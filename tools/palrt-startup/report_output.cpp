// SPDX-License-Identifier: MIT
#include "report_output.hpp"

#include <cinttypes>

#include "common/json_string.hpp"
#include "palrt/pal/cpu.hpp"
#include "palrt/startup/preload_probe.hpp"
#include "palrt/startup/system_facts.hpp"

namespace palrt::tools {
namespace {

// Every string printed here is one of palrt's own identifiers or the kernel release, which
// need no escaping today; escape anyway so the report stays valid JSON by construction.
void put_json_string(std::FILE* out, std::string_view s) { std::fputs(json_string(s).c_str(), out); }

const char* sync_worker_name(startup::sync_worker_start when) {
  return when == startup::sync_worker_start::eager ? "eager" : "lazy";
}

}  // namespace

void print_json_report(std::FILE* out, const run_facts& f) {
  const auto& r = *f.startup;
  const auto reg = startup::summarize_registration(r);
  std::fputs("{\"order\":", out);
  put_json_string(out, startup::internal::to_string(f.order));
  std::fputs(",\"sync_worker\":", out);
  put_json_string(out, sync_worker_name(f.sync_worker));
  std::fprintf(out, ",\"sync_worker_started\":%s", f.sync_worker_started ? "true" : "false");
  std::fprintf(out, ",\"membarrier_mask\":%" PRIu32 ",\"barrier_strategy\":", r.barrier.membarrier_mask);
  put_json_string(out, pal::to_string(r.barrier.strategy));
  std::fputs(",\"registered_by\":", out);
  put_json_string(out, startup::to_string(reg.registered_by));
  // A count only when one was taken: null otherwise, never a guess presented as a count.
  if (reg.threads_at_registration > 0)
    std::fprintf(out, ",\"threads_at_registration\":%d", reg.threads_at_registration);
  else
    std::fputs(",\"threads_at_registration\":null", out);
  std::fprintf(out, ",\"fast_path_inferred\":%s,\"registration_ns\":%" PRId64 ",\"registration_error\":%d",
               reg.fast_path_inferred ? "true" : "false", reg.registration_ns, r.barrier.registration_error);
  std::fputs(",\"phases\":[", out);
  for (std::size_t i = 0; i < r.phases.size(); ++i) {
    std::fputs(i ? ",{\"name\":" : "{\"name\":", out);
    put_json_string(out, r.phases[i].name);
    std::fprintf(out, ",\"start_ns\":%" PRId64 ",\"duration_ns\":%" PRId64 "}", r.phases[i].start_ns,
                 r.phases[i].duration_ns);
  }
  std::fprintf(out,
               "],\"bootstrap_ns\":%" PRId64 ",\"shutdown_ns\":%" PRId64
               ",\"shutdown_clean\":%s,\"extra_threads\":%d,\"processor_count\":%d,\"online_cpus\":%d"
               ",\"rcu_expedited\":%d,\"kernel\":",
               r.bootstrap_ns, f.shutdown_ns, f.shutdown_clean ? "true" : "false", f.extra_threads,
               pal::processor_count(), pal::online_cpus(), startup::rcu_expedited());
  put_json_string(out, startup::kernel_release());
  const services_counters& c = f.services;
  std::fprintf(out, ",\"objects\":%d,\"handles\":{", f.objects);
  for (std::size_t k = 0; k < gc::handle_kind_count; ++k) {
    std::fputs(k ? "," : "", out);
    put_json_string(out, gc::handle_kind_name(static_cast<gc::handle_kind>(k)));
    std::fprintf(out, ":%zu", c.handles.handles[k]);
  }
  std::fprintf(out,
               "},\"handle_blocks\":%zu,\"handle_bytes\":%zu,\"objects_created\":%" PRIu64 ",\"objects_freed\":%" PRIu64
               ",\"collections\":%" PRIu64 ",\"objects_finalized\":%" PRIu64 ",\"finalizer_exceptions\":%" PRIu64
               ",\"finalizers_left_at_shutdown\":%" PRIu64 ",\"longest_finalizer_ns\":%" PRId64 "}\n",
               c.handles.blocks, c.handles.bytes, c.objects.objects_created, c.objects.objects_freed,
               c.objects.collections, c.finalizer.finalized, c.finalizer.exceptions, c.finalizer.left_at_stop,
               c.finalizer.longest_finalizer_ns);
}

void print_text_report(std::FILE* out, const run_facts& f) {
  const auto& r = *f.startup;
  const auto reg = startup::summarize_registration(r);
  std::fprintf(out, "order              %.*s\n", static_cast<int>(startup::internal::to_string(f.order).size()),
               startup::internal::to_string(f.order).data());
  std::fprintf(out, "sync worker        %s (%s)\n", sync_worker_name(f.sync_worker),
               f.sync_worker_started ? "started" : "not started");
  std::fprintf(out, "barrier strategy   %s%s\n", std::string(pal::to_string(r.barrier.strategy)).c_str(),
               r.barrier.forced ? " (forced by PALRT_BARRIER)" : "");
  std::fprintf(out, "membarrier mask    0x%" PRIx32 "\n", r.barrier.membarrier_mask);
  std::fprintf(out, "registered by      %s", std::string(startup::to_string(reg.registered_by)).c_str());
  if (reg.registered_by != startup::registration_origin::none) {
    std::fprintf(out, " in %.1f us, ", reg.registration_ns / 1e3);
    if (reg.threads_at_registration > 0)
      std::fprintf(out, "%d thread%s alive (counted)", reg.threads_at_registration,
                   reg.threads_at_registration == 1 ? "" : "s");
    else
      std::fprintf(out, "threads not counted");
    std::fprintf(out, "%s\n",
                 reg.fast_path_inferred ? ", fast path (inferred from its duration)" : ", not the fast path");
  } else
    std::fprintf(out, "\n");
  std::fprintf(out, "phases\n");
  for (const auto& p : r.phases)
    std::fprintf(out, "  %-16s start %9.1f us  took %9.1f us\n", p.name.c_str(), p.start_ns / 1e3, p.duration_ns / 1e3);
  std::fprintf(out, "bootstrap          %.1f us\n", r.bootstrap_ns / 1e3);
  std::fprintf(out, "shutdown           %.1f us (%d extra thread%s)%s\n", f.shutdown_ns / 1e3, f.extra_threads,
               f.extra_threads == 1 ? "" : "s", f.shutdown_clean ? "" : ", NOT all threads joined");
  std::fprintf(out, "processors         %d usable, %d online\n", pal::processor_count(), pal::online_cpus());
  std::fprintf(out, "rcu_expedited      %d\n", startup::rcu_expedited());
  std::fprintf(out, "kernel             %s\n", startup::kernel_release().c_str());
  const services_counters& c = f.services;
  std::fprintf(out,
               "handles            %zu strong, %zu weak-short, %zu weak-long, %zu dependent (%zu blocks, %zu bytes)\n",
               c.handles.handles[0], c.handles.handles[1], c.handles.handles[2], c.handles.handles[3], c.handles.blocks,
               c.handles.bytes);
  std::fprintf(out, "objects            %" PRIu64 " created, %" PRIu64 " freed, %" PRIu64 " collections\n",
               c.objects.objects_created, c.objects.objects_freed, c.objects.collections);
  std::fprintf(
      out,
      "finalizer          %" PRIu64 " finalized (%" PRIu64 " threw), %" PRIu64 " left at shutdown, longest %.1f us\n",
      c.finalizer.finalized, c.finalizer.exceptions, c.finalizer.left_at_stop, c.finalizer.longest_finalizer_ns / 1e3);
}

}  // namespace palrt::tools

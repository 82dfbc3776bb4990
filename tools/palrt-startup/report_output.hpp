// SPDX-License-Identifier: MIT
// palrt-startup's reports: --report text (for people) and --report json (one object, for
// scripts: bench-startup.sh takes medians of bootstrap_ns and shutdown_ns from it).
#pragma once

#include <cstdint>
#include <cstdio>

#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/internal/baselines.hpp"  // the orders it runs
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"

namespace palrt::tools {

// The services' counters, read around shutdown: the handle table's while the run's handles
// are still held (before shutdown), the finalizer's after it stopped.
struct services_counters {
  gc::handle_counters handles;
  gc::collector_counters objects;
  gc::finalizer_counters finalizer;
};

struct run_facts {
  const startup::startup_report* startup = nullptr;
  startup::internal::ordering order = startup::internal::ordering::registered_first;  // as run
  std::int64_t shutdown_ns = 0;  // runtime shutdown plus joining the extra threads
  int extra_threads = 0;
  bool shutdown_clean = true;
  startup::sync_worker_start sync_worker = startup::sync_worker_start::lazy;  // as asked for
  bool sync_worker_started = false;  // whether bootstrap started the worker (and it ran)
  int objects = 0;                   // --objects: finalizable objects the run created and dropped
  services_counters services;
};

void print_text_report(std::FILE* out, const run_facts& facts);
void print_json_report(std::FILE* out, const run_facts& facts);

}  // namespace palrt::tools

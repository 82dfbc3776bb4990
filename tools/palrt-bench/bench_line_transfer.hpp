// SPDX-License-Identifier: MIT
// What moving one cache line from one CPU to another costs on this machine now.
//
// Why a benchmark needs it: a queue between threads on two CPUs moves each item's cache line
// from the poster's CPU to the server's at least once, and on a virtual machine that cost is
// not the machine's constant. The hypervisor places the two vCPUs where it likes (two threads
// of one core, two cores, at times further apart) and keeps them there for seconds: measured
// here, a line moved in ~40-60 ns in some runs and ~200 ns in others, and a server thread's
// CPU time per posted item moved with it (docs/BENCHMARKS.md, "post's slow mode"). A figure
// read without it cannot tell a regression from a run on a worse placement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench_component.hpp"
#include "bench_report.hpp"

namespace palrt::bench {

// The one-way transfer time of a cache line between `cpu_a` and `cpu_b` in ns: two threads
// pinned there hand a counter back and forth, `batches` batches of 1000 round trips; the
// median batch's half round trip (a batch in which either thread was scheduled out is slower,
// and the median leaves it out). Empty when either thread could not be pinned.
std::optional<double> line_transfer_ns(int cpu_a, int cpu_b, int batches);

// The batches a run of these settings measures with (fewer for --quick and --smoke).
int line_transfer_batches(const bench_settings& settings) noexcept;

// Measures the transfer between the first two of `cpus` (where a component's two threads, or
// its callers and its server, run) now and adds it as a row (case "line-transfer", variant
// "machine", metric `metric`, `threads` as the component's cases count them) with a progress
// line. Nothing with fewer than two CPUs or if pinning fails.
void report_line_transfer(bench_report& report, const bench_settings& settings, const std::vector<int>& cpus,
                          const std::string& metric, int threads = 2);

// The case's description, for a component that reports the rows before and after its
// 2-thread cases (`cases`: which).
std::string line_transfer_description(const std::string& cases);

}  // namespace palrt::bench

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

namespace palrt::bench {

// The one-way transfer time of a cache line between `cpu_a` and `cpu_b` in ns: two threads
// pinned there hand a counter back and forth, `batches` batches of 1000 round trips; the
// median batch's half round trip (a batch in which either thread was scheduled out is slower,
// and the median leaves it out). Empty when either thread could not be pinned.
std::optional<double> line_transfer_ns(int cpu_a, int cpu_b, int batches);

}  // namespace palrt::bench

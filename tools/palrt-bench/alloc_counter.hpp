// SPDX-License-Identifier: MIT
// Heap allocations made by the whole process, counted by palrt-bench's own global operator
// new (alloc_counter.cpp): the `allocs_per_op` metric. Every C++ allocation of every thread
// (palrt's, a baseline's, libstdc++'s, Boost's) goes through it; plain malloc() does not.
#pragma once

#include <cstdint>

namespace palrt::bench {

// Allocations so far, all threads. The counter is one relaxed atomic: the few nanoseconds an
// increment costs are paid by whichever variant allocates, which is what is being measured.
std::uint64_t heap_allocations() noexcept;

}  // namespace palrt::bench

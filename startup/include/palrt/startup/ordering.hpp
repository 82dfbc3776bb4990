// The order in which the bootstrap registers for membarrier and starts service threads.
//
//   registered-first  register while the process has one thread (the kernel's fast path,
//                     ~1 us), then start the service threads. The default; the only order
//                     a new host should use.
//   threads-first     start the service threads, then register: CoreCLR's order before the
//                     fix. The kernel then waits an RCU grace period,
//                     ~16 ms on 2-core machines. For reproducing old behaviour and benchmarks.
//   no-membarrier     never register; the process barrier falls back to mprotect or signals.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <optional>
#include <string_view>

namespace palrt::startup {

enum class ordering { registered_first, threads_first, no_membarrier };

std::string_view to_string(ordering o) noexcept;
std::optional<ordering> parse_ordering(std::string_view name) noexcept;

}  // namespace palrt::startup

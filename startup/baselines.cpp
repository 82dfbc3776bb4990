// SPDX-License-Identifier: MIT
// The startup orders' names (internal/baselines.hpp); runtime_access::bootstrap is in
// bootstrap.cpp, with the bootstrap it parameterises.
#include "palrt/startup/internal/baselines.hpp"

namespace palrt::startup::internal {

std::string_view to_string(ordering o) noexcept {
  switch (o) {
    case ordering::registered_first: return "registered-first";
    case ordering::threads_first: return "threads-first";
    case ordering::no_membarrier: return "no-membarrier";
  }
  return "unknown";
}

std::optional<ordering> parse_ordering(std::string_view name) noexcept {
  for (auto o : {ordering::registered_first, ordering::threads_first, ordering::no_membarrier})
    if (name == to_string(o)) return o;
  return std::nullopt;
}

}  // namespace palrt::startup::internal

#include "palrt/startup/ordering.hpp"

namespace palrt::startup {

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

}  // namespace palrt::startup

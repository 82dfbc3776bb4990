// SPDX-License-Identifier: MIT
// The identity cache's names and errors.
#include <cstdio>
#include <string>

#include "palrt/interop/identity_cache.hpp"
#include "palrt/interop/internal/cache_design.hpp"

namespace palrt::interop {

const char* internal::cache_design_name(cache_design design) noexcept {
  using enum cache_design;
  switch (design) {
    case palrt: return "palrt";
    case bucketed_rwlock: return "bucketed-rwlock";
    case single_lock: return "single-lock";
    case pybind11_shards: return "pybind11-shards";
  }
  return "unknown";
}

namespace {
std::string mismatch_message(const void* asked, const void* registered) {
  char text[200];
  std::snprintf(text, sizeof text,
                "palrt: identity_cache::get_or_create: the factory for identity %p returned the wrapper of "
                "identity %p",
                asked, registered);
  return text;
}
}  // namespace

identity_mismatch::identity_mismatch(const void* asked, const void* registered)
    : std::invalid_argument(mismatch_message(asked, registered)), asked_(asked), registered_(registered) {}

}  // namespace palrt::interop

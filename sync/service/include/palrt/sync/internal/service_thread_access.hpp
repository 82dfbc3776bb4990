// SPDX-License-Identifier: MIT
// What tests reach in a service thread beyond its public API.
#pragma once

#include <cstdint>

#include "palrt/sync/service_thread.hpp"

namespace palrt::sync::internal {

class service_thread_access {
 public:
  // Times the current launch's loop woke up to run its work (0 before the first launch).
  static std::uint64_t wakeups(const service_thread& t) noexcept;
};

}  // namespace palrt::sync::internal

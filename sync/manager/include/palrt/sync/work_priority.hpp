// SPDX-License-Identifier: MIT
// Priorities of the sync manager's work queue (sync_manager.hpp), lowest first. The worker
// runs the oldest item of the highest priority that has one; within a priority, first in,
// first out. A stream of high-priority work delays lower priorities without bound: that is
// what priorities are for, so keep high for short items.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstddef>
#include <cstdint>

namespace palrt::sync {

enum class work_priority : std::uint8_t { background, low, normal, high };

inline constexpr std::size_t work_priority_count = 4;

}  // namespace palrt::sync

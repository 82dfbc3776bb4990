// SPDX-License-Identifier: MIT
// What the sync manager and tests reach in the objects and waits beyond their public API.
#pragma once

#include <cstddef>
#include <memory>

#include "palrt/sync/handle.hpp"
#include "palrt/sync/process_handle.hpp"

namespace palrt::sync::internal {

class waitable_object;
class process_object;

class waits_access {
 public:
  static const std::shared_ptr<waitable_object>& object_of(const handle& h) noexcept { return h.object_; }
  static process_handle make_process_handle(std::shared_ptr<process_object> p);
  // Threads currently waiting on the object (a test's way to know a waiter is asleep on it
  // before it signals, instead of sleeping). 0 for a closed handle.
  static std::size_t waiter_count(const handle& h);
};

}  // namespace palrt::sync::internal

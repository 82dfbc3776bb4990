// SPDX-License-Identifier: MIT
// What tests reach in the finalizer thread beyond its public API: its service thread (tid,
// name, wake-ups), read-only.
#pragma once

#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/sync/internal/service_thread_access.hpp"

namespace palrt::gc::internal {

class finalizer_thread_access {
 public:
  static const sync::service_thread& thread(const finalizer_thread& f) noexcept { return f.thread_; }
};

}  // namespace palrt::gc::internal

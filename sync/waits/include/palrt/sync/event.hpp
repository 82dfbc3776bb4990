// SPDX-License-Identifier: MIT
// Events: Win32-style manual-reset and auto-reset events.
//
// A manual-reset event stays signalled until reset(): set() releases every waiter, and every
// later wait returns at once. An auto-reset event releases exactly one waiter per set() (the
// one that has waited longest) and resets itself as it does; with nobody waiting it stays
// signalled until one wait consumes it. set() on an event already signalled does nothing
// (signals do not count up: that is what a semaphore is for).
//
// Use an event for "something happened" between threads that wait with wait_one / wait_any /
// wait_all (wait.hpp), possibly together with other objects or alertably. For a plain
// one-waker one-sleeper signal inside palrt, pal::wake_event is lighter.
//
// Thread-safe: any thread may set, reset and wait at the same time.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

enum class event_reset { manual, automatic };

class event_handle : public handle {
 public:
  event_handle() noexcept = default;  // closed
  // A new event. Throws std::bad_alloc only.
  explicit event_handle(event_reset reset, bool initially_signalled = false);

  // Signals the event (see above). Throws sync_error(EBADF) on a closed handle.
  void set();
  // Makes it unsignalled. Throws sync_error(EBADF) on a closed handle.
  void reset();
};

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
// State that must outlive every use and can never be destroyed safely: a parent's state in a
// fork()ed child (its locks may be held for good, its threads are gone), or a collector's
// state when the collector is destroyed with objects still alive (a reference dropped later
// pushes onto its dead list). Kept reachable from a global, so leak checkers count it as
// kept, not lost.
#pragma once

#include <memory>

namespace palrt::pal::internal {

// Keeps `state` (and what it owns) allocated, reachable and untouched until the process
// exits. Lock-free (a child may call it whatever locks its parent held). Aborts with a
// message if it cannot allocate the few bytes this takes: destroying the state instead could
// hang or free memory still in use.
void keep_until_exit(std::shared_ptr<const void> state) noexcept;

}  // namespace palrt::pal::internal

// SPDX-License-Identifier: MIT
// What links process_copies.cpp (the note, and the check at load) into every copy of palrt
// that has process-wide state: process_barrier.cpp takes its address.
#pragma once

namespace palrt::pal::internal {
extern const char this_copy;
}  // namespace palrt::pal::internal

// The three process-barrier strategies, one file each (barrier_<name>.cpp). Each factory
// sets its strategy up or throws barrier_error with the errno that stopped it; nothing in
// them depends on other palrt state being initialised.
#pragma once

#include <memory>

#include "palrt/pal/process_barrier.hpp"

namespace palrt::pal::internal {

// Requires that this process is registered for PRIVATE_EXPEDITED, or registers it when
// `register_if_needed` (which takes the slow path if threads already exist).
std::unique_ptr<barrier_instance> make_membarrier_barrier(bool register_if_needed);

// `automatic`: refuse where the trick is not known to be reliable (not x86-64, or the CPU
// flushes TLBs by broadcast without IPIs), so only an explicit force uses it there.
std::unique_ptr<barrier_instance> make_mprotect_barrier(bool automatic);

std::unique_ptr<barrier_instance> make_signal_barrier();

[[noreturn]] void barrier_failed(const char* strategy, int error) noexcept;

}  // namespace palrt::pal::internal

// The three process-barrier strategies, one file each (barrier_<name>.cpp). Each factory
// sets its strategy up or throws barrier_error with the errno that stopped it; nothing in
// them depends on other palrt state being initialised.
#pragma once

#include <memory>

#include "palrt/pal/process_barrier.hpp"

namespace palrt::pal::internal {

// `registered`: the caller has just registered this process successfully. Otherwise this
// checks the kernel offers the commands and registers (the slow path if threads exist).
std::unique_ptr<barrier_instance> make_membarrier_barrier(bool registered);

// `automatic`: refuse where the trick is not known to be reliable (not x86-64, or the CPU
// flushes TLBs by broadcast without IPIs), so only an explicit force uses it there.
std::unique_ptr<barrier_instance> make_mprotect_barrier(bool automatic);

std::unique_ptr<barrier_instance> make_signal_barrier();

[[noreturn]] void barrier_failed(const char* strategy, int error) noexcept;

}  // namespace palrt::pal::internal

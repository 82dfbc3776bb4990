// SPDX-License-Identifier: MIT
// What links process_copies.cpp (the note, and the check at load) into every copy of palrt
// that has process-wide state: process_barrier.cpp takes its address.
#pragma once

#include <cstddef>

namespace palrt::pal::internal {
extern const char this_copy;

// The loaded object whose segments hold `address`: writes its path to `path` (cut short to
// `size` bytes; the main program's as /proc/self/exe names it), sets *copy (unless null) to
// whether it carries palrt's note, that is holds a copy of palrt, and returns true. Returns
// false with `path` empty when no loaded object holds the address (code mapped by hand, a
// JIT's). Allocates
// nothing and takes no lock of its own, so an aborting flush may name a handler's object from
// a signal handler; dl_iterate_phdr takes the dynamic loader's recursive lock.
bool object_holding(const void* address, char* path, std::size_t size, bool* copy) noexcept;
}  // namespace palrt::pal::internal

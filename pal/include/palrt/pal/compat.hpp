// SPDX-License-Identifier: MIT
// CoreCLR's PAL names for palrt operations, for hosts porting PAL code. palrt's own API is in
// namespace palrt::pal; these are one-line forwards with the same behaviour (and failure
// behaviour) as the function they name.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include "palrt/pal/process_barrier.hpp"

// palrt::pal::flush_process_write_buffers(): after it returns, every other thread of the
// process has executed a full memory barrier.
inline void FlushProcessWriteBuffers() { palrt::pal::flush_process_write_buffers(); }

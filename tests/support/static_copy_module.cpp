// SPDX-License-Identifier: MIT
// A plugin that links libpalrt.a statically (its own copy of palrt), as an extension module
// built against the static library does. The shared_library suite loads it beside
// libpalrt.so, and two of it, to see the second copy say so.
#include "palrt/pal/process_barrier.hpp"

extern "C" [[gnu::visibility("default")]] void palrt_test_static_copy_flush() {
  palrt::pal::flush_process_write_buffers();
}

// SPDX-License-Identifier: MIT
// Is the preload shim (libpalrt-preload.so) in this process, and did it register?
//
// Looked up with dlsym when asked (for reports and the doctor), and on the startup path only
// when the bootstrap's own registration found the process registered already: then the
// shim's record stands in for the thread census (no /proc read). A host bootstrapped under
// the shim still calls REGISTER itself; the kernel answers at once because the shim
// registered first, so the shim is who took the fast path.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstdint>
#include <optional>
#include <string_view>

#include "palrt/startup/bootstrap.hpp"

namespace palrt::startup {

struct preload_status {
  bool registered = false;          // the shim registered this process
  bool disabled = false;            // PALRT_PRELOAD=0, false, no or off
  bool by_pthread_create = false;   // registered in its pthread_create hook, not its constructor
  int error = 0;                    // errno of a failed registration
  int threads_at_registration = 0;  // counted from /proc; 0 when the shim did not count
  bool fast_path_inferred = false;  // the registration looked like the fast path (timing)
  std::int64_t registration_ns = 0;
};

// nullopt when the shim is not loaded in this process (or is of another palrt version).
std::optional<preload_status> find_preload_shim() noexcept;

enum class registration_origin { bootstrap, preload, none };
std::string_view to_string(registration_origin o) noexcept;

struct registration_summary {
  registration_origin registered_by = registration_origin::none;
  // Of the registration that mattered: threads counted from /proc (0 = not counted), and
  // whether it looked like the kernel's fast path (inferred from timing, not counted).
  int threads_at_registration = 0;
  bool fast_path_inferred = false;
  std::int64_t registration_ns = 0;
};

// Who registered this process: the shim if it did, else the bootstrap if it did, else none.
registration_summary summarize_registration(const startup_report& report) noexcept;

}  // namespace palrt::startup

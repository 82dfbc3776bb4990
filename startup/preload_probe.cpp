// SPDX-License-Identifier: MIT
#include "palrt/startup/preload_probe.hpp"

#include <dlfcn.h>

#include "palrt/startup/internal/preload_info.h"

namespace palrt::startup {

std::optional<preload_status> find_preload_shim() noexcept {
  using info_fn = const struct palrt_preload_info* (*)();
  auto fn = reinterpret_cast<info_fn>(::dlsym(RTLD_DEFAULT, PALRT_PRELOAD_INFO_SYMBOL));
  if (!fn) return std::nullopt;
  const struct palrt_preload_info* info = fn();
  if (!info || info->version != PALRT_PRELOAD_INFO_VERSION) return std::nullopt;
  preload_status s;
  s.registered = info->state == PALRT_PRELOAD_REGISTERED;
  s.disabled = info->state == PALRT_PRELOAD_DISABLED;
  s.by_pthread_create = info->trigger == PALRT_PRELOAD_BY_PTHREAD_CREATE;
  s.error = info->state == PALRT_PRELOAD_FAILED ? info->registration.error : 0;
  s.threads_at_registration = info->threads_at_registration;
  s.fast_path_inferred = info->fast_path_inferred != 0;
  s.registration_ns = info->registration.duration_ns;
  return s;
}

std::string_view to_string(registration_origin o) noexcept {
  switch (o) {
    case registration_origin::bootstrap: return "bootstrap";
    case registration_origin::preload: return "preload";
    case registration_origin::none: return "none";
  }
  return "unknown";
}

registration_summary summarize_registration(const startup_report& report) noexcept {
  registration_summary r;
  if (auto shim = find_preload_shim(); shim && shim->registered) {
    r.registered_by = registration_origin::preload;
    r.threads_at_registration = shim->threads_at_registration;
    r.fast_path_inferred = shim->fast_path_inferred;
    r.registration_ns = shim->registration_ns;
  } else if (report.barrier.registered) {
    r.registered_by = registration_origin::bootstrap;
    r.threads_at_registration = report.barrier.threads_at_registration;
    r.fast_path_inferred = report.barrier.fast_path_inferred;
    r.registration_ns = report.barrier.registration_ns;
  }
  return r;
}

}  // namespace palrt::startup

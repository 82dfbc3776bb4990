// SPDX-License-Identifier: MIT
// An earlier registrant's word on this process's membarrier registration.
//
// palrt's preload shim registers a process before its first thread and keeps a record of how
// that went. A bootstrap in that process then finds the process registered already: its own
// REGISTER returns at once, yet does not look like a first registration on the fast path,
// so the default census (registration_census::if_slow) would read /proc on every run to count
// threads that have nothing to do with the registration that mattered. The record answers
// that question instead. pal does not know the shim (the layers point down: startup/ does),
// so the bootstrap hands pal a way to read the record, and pal reads it only where it would
// otherwise take the census: never on a registration that looks fast, never with `always`.
#pragma once

#include <optional>

#include "palrt/pal/process_barrier.hpp"

namespace palrt::pal::internal {

struct earlier_registration {
  int threads_at_registration = 0;  // counted by the registrant right after it registered; 0: not counted
  bool fast_path_inferred = false;  // its registration looked like the kernel's fast path (timing)
};

// The record of whoever registered this process first, or nullopt when there is none (no
// shim, a shim that did not register). Must not start threads or throw.
using earlier_registration_lookup = std::optional<earlier_registration> (*)() noexcept;

// initialize_process_barrier() with `earlier` consulted, at most once, when `census` is
// if_slow, the process was registered before this call (or the kernel cannot tell: before
// 6.3) and this call's registration did not look fast. A record that says the registration
// ran with one thread (counted 1, or inferred from timing) replaces the census: the state's
// threads_at_registration stays 0 ("not counted") and the record is what a report shows
// (startup's summarize_registration()). A record that says anything else leaves the census
// to be taken. `earlier` may be null: then this is initialize_process_barrier().
const process_barrier_state& initialize_process_barrier(registration_mode mode, registration_census census,
                                                        earlier_registration_lookup earlier);

}  // namespace palrt::pal::internal

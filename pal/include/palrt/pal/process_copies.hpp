// SPDX-License-Identifier: MIT
// palrt::pal::process_copies: the copies of palrt loaded in this process.
//
// palrt keeps process-wide state (the membarrier registration and the process barrier, the
// thread census, the handle tables' per-thread caches, the grace periods of read sections).
// Two copies in one process keep two of each, and neither knows of the other's threads or
// barriers: two extension modules that each link libpalrt.a statically, or one that does
// beside libpalrt.so. So every copy carries an ELF note ("palrt"), and when a copy is loaded
// it looks for the others (dl_iterate_phdr over the loaded objects' PT_NOTE segments) and, if
// it finds one, says so once on stderr, naming both objects, for example:
//   palrt: a second copy of palrt is loaded: /path/b.so; the first is /path/a.so. Each keeps
//   its own process-wide state; link every module of the process against libpalrt.so
// The fix is the message's: one libpalrt.so for every module of the process.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <string>
#include <vector>

namespace palrt::pal {

// The objects (their paths; the main program's as /proc/self/exe names it) that hold a copy
// of palrt, in load order. One element when all is well.
std::vector<std::string> process_copies();

}  // namespace palrt::pal

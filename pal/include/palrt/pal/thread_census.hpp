// How many threads this process has right now, from the kernel's own count
// (/proc/self/status "Threads:"). Used to report whether membarrier registration ran while
// the process had one thread (the kernel's fast path). Costs one procfs read (~15 us), so it
// is never on a hot path.
#pragma once

namespace palrt::pal {

// Threads alive in this process, or 0 if /proc is unavailable.
int threads_in_process() noexcept;

}  // namespace palrt::pal

// SPDX-License-Identifier: MIT
// The reclaimer's side of read sections (read_section.hpp): tag what was retired with an
// epoch, then ask whether every reader that could still see it has left its section.
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace palrt::gc::internal {

// Call after unlinking a batch (clearing the handles that led to it): advances the global
// epoch and returns the batch's tag.
std::uint64_t retire_epoch() noexcept;

// The reclaimer's first step, the scan: reads the global epoch, runs the process-wide
// barrier, then returns the smaller of that epoch and the oldest epoch a reader is still in.
// A batch tagged t may be freed once this is > t: exactly the batches retired before the call
// that no reader can still reach. A batch retired after the call began (by another thread,
// while the caller had not yet locked its retired list) never passes it, even when no reader
// was in a section; so the second step, the walk of a list that grew after the scan, is
// safe (reader_epoch.cpp has the argument).
std::uint64_t oldest_reader_epoch();

// The largest value any oldest_reader_epoch() returned so far, in any thread (1 before the
// first): a batch tagged below it may be freed now, with no scan of its own. A scan's verdict
// never expires (reader_epoch.cpp), so a reclaimer that can wait may let other threads' scans
// serve it and save its own barrier.
std::uint64_t known_safe_epoch() noexcept;

// A grace period, waited for: returns once every read section that was open anywhere in the
// process when it was called has closed (a reader that opens one after the call began sees
// whatever the caller stored before it). Yields, then backs off, while a reader is inside:
// sections are short, so it does not time out. For a writer that must know no reader is
// still using what it stopped publishing (host_identity_cache::close()). Throws
// std::logic_error, naming `who`, when called inside a read section of the calling thread
// (it would wait for itself).
void wait_for_readers(const char* who);

// One step of waiting for a reader inside its section (a few ns normally; longer if it was
// preempted): give it the CPU for the first attempts, then back off, up to a millisecond, as
// liburcu's synchronize_rcu does. For every loop that waits on readers (wait_for_readers,
// drain_retired, collector::synchronize).
// Inline: no library symbol for a loop step.
inline void reader_wait_backoff(int attempt) {
  if (attempt < 10)
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * attempt)));
}

// Tests' view of wait_for_readers(): `hook(context)` runs each time it found a reader inside
// and is about to wait for it (the window close() must not return in). Null: none.
class reader_wait_access {
 public:
  static void on_wait(void (*hook)(void* context), void* context) noexcept;
};

// Readers registered so far (threads that ever opened a section), and of them in use.
struct reader_census {
  std::size_t records = 0;
  std::size_t in_use = 0;
  std::uint64_t left_open_at_exit = 0;  // threads that exited inside a section (reset then)
};
reader_census count_readers() noexcept;

// Tests' view of gc::retire (retire.hpp, retire.cpp).
class retire_access {
 public:
  // `hook(context)` runs in drain_retired(), on the draining thread, right after it fixed
  // what it waits for (the batches tagged before that moment) and before it first looks: the
  // window in which other threads' later batches must not be waited for. Null: none.
  static void on_drain_horizon(void (*hook)(void* context), void* context) noexcept;
};

}  // namespace palrt::gc::internal

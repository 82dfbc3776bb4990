// SPDX-License-Identifier: MIT
// palrt::gc::retire: free what lock-free readers may still be reading, after a grace period.
//
// A reader inside a read section (read_section.hpp) may hold a pointer it loaded just before
// another thread unlinked what it points to: a wrapper erased from a grace_period
// host_identity_cache, which a concurrent try_get() found and is handing to the policy's
// try_acquire() right now; a node taken out of a host's own lock-free structure. Freeing it
// at once is a use-after-free. retire(p, reclaim) calls reclaim(p) later, once every read
// section that was open anywhere in the process when retire() was called has closed (a grace
// period): liburcu's call_rcu(), folly's rcu_retire().
//
// Example (a wrapper whose count reached zero, erased from a grace_period cache):
//   struct host_wrapper { std::atomic<long> count{1}; };
//   host_wrapper* w = new host_wrapper;
//   // ... its count reaches zero; the host erases its entry (cache.erase(token)) and then:
//   palrt::gc::retire(w, [](void* p) noexcept { delete static_cast<host_wrapper*>(p); });
//
// retire(p, reclaim)
//   Queues reclaim(p). Unlink p first: a reader that opens its section after retire() was
//   called must not be able to reach it. Thread-safe; the calls of one thread go into a batch
//   of the thread's own (no lock), up to retire_batch_capacity; a full batch is tagged with the
//   global epoch and queued process-wide (one short lock), and then the calling thread runs
//   the queued batches whose grace period has passed, outside any lock: as far as another
//   thread's scan of the readers already tells (no barrier), or, once retire_scan_batches
//   batches wait, after a scan of its own (one process-wide barrier). Costs: a few
//   nanoseconds per call, plus one barrier per retire_scan_batches * retire_batch_capacity
//   calls, plus the reclaims: tens of nanoseconds per call in all with one thread retiring,
//   more where the barrier must interrupt other busy CPUs (figures in docs/BENCHMARKS.md,
//   "gc::retire beside call_rcu"). What waits is bounded by retire_scan_batches batches
//   beyond what readers' sections hold back. Throws std::bad_alloc when a new batch cannot be allocated (once per
//   retire_batch_capacity calls); p is then not retired (the caller still owns it, and may free it
//   after drain_retired() returned true). Not async-signal-safe.
// reclaim_retired()
//   Queues the calling thread's partial batch and runs every queued batch (any thread's) whose
//   grace period has passed; waits for nothing. Returns how many reclaims ran. A host calls it
//   where it wants retired memory back without retiring more: after a collection, when idle.
// drain_retired(timeout)
//   As reclaim_retired(), then waits (yielding, then backing off) until every reclaim retired
//   before the call has run (on whichever thread runs it), or until `timeout` passed: true if
//   they all ran. It does not wait for what other threads retire after the call began, so a
//   thread that keeps retiring does not hold it up; called from a reclaim, it does not wait
//   for the batches its own thread is running. For the end of a
//   runtime (everything it retired must be gone before its allocator is) and for tests. Throws
//   std::logic_error when called inside a read section of the calling thread (the section
//   would hold its own grace period for the whole timeout).
//
// Where reclaims run: on whichever thread calls retire(), reclaim_retired() or drain_retired()
// when a batch is due, which may be another thread than the one that retired it, never under
// a palrt lock. A reclaim may call anything, retire() included, and must not throw (the
// type says so). Reclaims run in no particular order. A thread's partial batch is queued when
// the thread exits; what is queued and never due again before the process exits is not run
// (its memory stays allocated until exit): call drain_retired() where that matters.
//
// After fork() (palrt/pal/fork.hpp): what the parent had queued is the child's copy and the
// child's reclaims run it; a partial batch of one of the parent's other threads, or a batch
// one of them was running at fork(), is never run in the child (it stays allocated), and a
// drain in the child does not wait for it. The forking thread's own batches are the child's.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstddef>

namespace palrt::gc {

using reclaim_fn = void (*)(void* p) noexcept;

// Retirements a thread collects before it queues them and reclaims what is due.
inline constexpr std::size_t retire_batch_capacity = 64;
// Queued batches that make a thread whose batch filled scan the readers itself.
inline constexpr std::size_t retire_scan_batches = 4;

void retire(void* p, reclaim_fn reclaim);
std::size_t reclaim_retired();
[[nodiscard]] bool drain_retired(std::chrono::nanoseconds timeout = std::chrono::seconds(2));

}  // namespace palrt::gc

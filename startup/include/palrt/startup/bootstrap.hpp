// SPDX-License-Identifier: MIT
// palrt::startup::bootstrap(): start a runtime in the right order.
//
// Example:
//   auto rt = palrt::startup::bootstrap();
//   // ... the host runs; rt->services() has the handle table, the collector, the finalizer
//   // ... and the sync manager ...
//   rt->shutdown();                            // or let the destructor do it
//
// Phases, in order, each timed (CLOCK_MONOTONIC): process barrier (membarrier registration
// while the process has one thread, strategy choice), handle table (with the embedded
// collector), finalizer thread, sync manager.
//
// Service threads: bootstrap() returns once each service thread exists, without waiting for
// it to enter its loop (that wait was a round trip between two threads on every start; the
// thread is there to serve work, and work waits for it). Nothing is lost meanwhile: work
// signalled to a thread that has not reached its loop yet (collect() queuing finalizers) is
// kept and served when it gets there, a stop request likewise (shutdown() joins it), and a
// thread that cannot be created fails its phase inside bootstrap() (startup_error, below):
// creating it is the last step that can fail. The thread hooks (pal/thread_factory.hpp) run
// on the thread as it starts, which may be after bootstrap() returned. A host that fork()s
// right after bootstrap() and starts threads in the child should first let the service
// threads reach their loops (services().finalizer().wait_until_running()): a child forked
// while a thread is being created inherits whatever that creation held, and a sanitizer's
// runtime holds locks there that its fork handling does not take.
//
// Failure: if a phase fails, the phases already started are stopped in reverse order, no
// thread of theirs is left behind, and startup_error names the phase and carries its errno.
// bootstrap() does not catch anything else: std::bad_alloc propagates after the same unwind.
//
// One runtime per process at a time: bootstrap() while another runtime is alive and not shut
// down throws startup_error (phase "bootstrap", EBUSY) and starts nothing; once that runtime
// has shut down, a new bootstrap() may start another.
//
// Cancellation: bootstrap(), shutdown() and the runtime's destructor are neither POSIX
// cancellation points nor Boost interruption points, though they read /proc (the thread
// census), join threads (pal/thread_factory.hpp) and run finalizers (gc/collector.hpp): a
// pending pthread_cancel() acts at the caller's next cancellation point after them.
//
// After fork() (palrt/pal/fork.hpp): in the child, a runtime bootstrapped before fork() is
// the parent's. It does not count as the child's runtime, so the child may bootstrap() one of
// its own. Its shutdown() returns at once and stops nothing, since the threads it would stop
// and join do not exist in the child: the report has forked_child set (or, if it had shut
// down before fork(), is that shutdown's report). Destroying it returns at once too, and its
// services fail fast as their headers say.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "palrt/pal/process_barrier.hpp"
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::startup {

namespace internal {
class phase;
class services_access;
// palrt's own benchmarks start runtimes in the slower orders palrt is measured against;
// those are in palrt's source tree only, not among the installed headers.
class runtime_access;
enum class ordering : unsigned char;
}  // namespace internal

// The services a runtime owns, each valid from bootstrap() until the runtime is destroyed
// (a failed bootstrap leaves no runtime at all). shutdown() stops their threads and keeps
// them: a service used after shutdown() says so as its header describes. Destroyed in
// reverse order with the runtime, after its last collect() (~runtime): the collector frees
// what is dead then (objects the host still holds are reported on stderr and left
// allocated, see collector.hpp).
class runtime_services {
 public:
  runtime_services() = default;
  runtime_services(const runtime_services&) = delete;
  runtime_services& operator=(const runtime_services&) = delete;

  gc::handle_table& handle_table() const noexcept { return *handle_table_; }
  gc::collector& collector() const noexcept { return *collector_; }  // sweeps handle_table()
  gc::finalizer_thread& finalizer() const noexcept { return *finalizer_; }
  sync::sync_manager& sync_manager() const noexcept { return *sync_manager_; }

 private:
  friend class internal::services_access;  // the bootstrap's phases create them in order
  std::unique_ptr<gc::handle_table> handle_table_;
  std::unique_ptr<gc::collector> collector_;
  std::unique_ptr<gc::finalizer_thread> finalizer_;
  std::unique_ptr<sync::sync_manager> sync_manager_;
};

enum class sync_worker_start {
  lazy,   // at the first request that needs it (the default)
  eager,  // during bootstrap, like CoreCLR's PAL (palrt-startup --sync-worker eager)
};

struct options {
  sync_worker_start sync_worker = sync_worker_start::lazy;
  // How long shutdown (and unwinding after a failure) waits for each service thread.
  std::chrono::nanoseconds stop_timeout = std::chrono::seconds(2);
  // Count the threads alive at registration from /proc (~15-50 us) even when the
  // registration looks like the kernel's fast path, so the report shows a count rather than
  // an inference (report().barrier). For reports; off on the default startup path.
  bool count_threads_at_registration = false;
};

class startup_error : public std::system_error {
 public:
  startup_error(std::string phase, std::error_code code, const std::string& what);
  // The phase that failed: "process-barrier", "handle-table", "finalizer", "sync-manager",
  // or "bootstrap"
  // when no phase ran (another runtime is alive: EBUSY).
  const std::string& phase() const noexcept { return phase_; }

 private:
  std::string phase_;
};

struct phase_record {
  std::string name;
  std::int64_t start_ns = 0;     // from the start of the bootstrap
  std::int64_t duration_ns = 0;  // the phase's start(): its threads created, not yet running
};

struct startup_report {
  std::vector<phase_record> phases;
  // From the start of the first phase to the end of the last (for registered-first, from
  // the start of registration): every service thread exists, not necessarily running yet.
  std::int64_t bootstrap_ns = 0;
  pal::process_barrier_state barrier;  // strategy, mask, registration timing and census
};

struct shutdown_report {
  std::int64_t duration_ns = 0;
  std::vector<std::string> not_joined;  // phases whose threads missed the stop timeout
  // shutdown() ran in a child fork()ed after bootstrap(): the runtime's threads are the
  // parent's and do not exist there, so nothing was stopped or joined (see "After fork()").
  bool forked_child = false;
  bool clean() const noexcept { return not_joined.empty(); }
};

class runtime {
 public:
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  // Shuts down if shutdown() was not called, then runs one last collect() on the calling
  // thread before the services are destroyed: the finalizers still queued (what shutdown()
  // left: a long queue, or those behind a finalizer that missed stop_timeout and may still
  // run on its detached thread) and those of objects dead by then run there, none twice, as
  // collect() runs them without a finalizer thread (collector.hpp; a finalizer that blocks
  // blocks it). What it cannot run (std::bad_alloc) is reported on stderr. In a fork()ed
  // child it does neither (see "After fork()").
  ~runtime();

  const startup_report& report() const noexcept { return report_; }
  // The services, valid until the runtime is destroyed (stopped after shutdown()).
  runtime_services& services() noexcept { return services_; }
  const runtime_services& services() const noexcept { return services_; }

  // Stops every phase in reverse order and joins their threads, each within
  // options::stop_timeout; a thread that misses it is detached and named in not_joined.
  // Idempotent and safe from any thread, also from several at once: one call does the work,
  // every call returns the same report once it is done. Not from a service thread of this
  // runtime (it would wait for itself until the timeout).
  const shutdown_report& shutdown();

 private:
  friend class internal::runtime_access;
  runtime(const options& opts, internal::ordering order);

  options options_;
  std::vector<std::unique_ptr<internal::phase>> phases_;
  runtime_services services_;
  startup_report report_;
  std::once_flag shutdown_once_;
  shutdown_report shutdown_report_;
  std::atomic<bool> shut_down_{false};  // shutdown_report_ is final (release/acquire)
  bool holds_process_slot_ = false;     // this runtime counts as the process's live runtime
  std::uint64_t fork_generation_ = 0;   // the fork generation it started in (pal/fork.hpp)
};

// Throws startup_error. Call it from the thread that will own the runtime, before the host
// starts threads of its own (otherwise registration cannot take the fast path; the report's
// barrier fields show it). At most one runtime is alive at a time (see above).
[[nodiscard]] std::unique_ptr<runtime> bootstrap(const options& opts = {});

}  // namespace palrt::startup

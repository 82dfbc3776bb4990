// SPDX-License-Identifier: MIT
// The finalizer thread: runs the finalizers of dead objects off the threads that found them
// dead, so that a collection never waits for host cleanup code.
//
// collect() (collector.hpp) queues dead finalizable objects and wakes this thread (an
// auto-reset event: wake-ups coalesce). The thread takes the objects from the queue one at a
// time, oldest first, reporting progress in batches; each finalize() runs with its exceptions contained: counted,
// handed to the host's handler (or, without one, the first reported on stderr), and the thread goes on. A finalized
// object goes back to the collector, whose next collect() clears its long weak handles and frees it (unless the
// finalizer resurrected it).
//
// wait_for_pending_finalizers() waits for exactly the objects queued before the call (a
// sequence number, not "the next time the queue is empty"), so it cannot return on a drain
// that began before the caller's objects were queued; on the finalizer thread itself it
// returns at once.
//
// Without a running finalizer thread (before start(), after stop(), or no finalizer_thread
// at all) nothing is held silently: collect() runs the finalizers itself, on its caller's
// thread, after dropping the collector's lock (collector.hpp).
//
// Shutdown is bounded: stop() asks the thread to stop after the finalizer that is running, and
// joins it within a timeout. The thread holds no object but the one whose finalizer runs:
// every other one stays queued (counters().left_at_stop), and once stop() returned, the next
// collect() runs them all on its caller's thread (collector.hpp), and start() again hands
// them to the new thread instead; destroying the bootstrap's runtime runs them too
// (bootstrap.hpp). That holds when the thread missed the deadline as well: the finalizer that
// blocks goes on running on the detached thread, alone there, while collect() runs the others
// (the one case of two finalizers running at once); its object stays allocated until it
// returns (a collector destroyed meanwhile keeps it, and says so on stderr), and the thread
// then hands it back and takes nothing more.
// A finalizer that blocks cannot hang process exit: the thread is detached, keeps the state
// it uses alive, and finishes on its own if the finalizer ever returns. The counters show
// the longest finalizer so far and the one running now, so a stuck one is visible.
//
// A host's own finalization queue (a collector of its own: Boehm, a JVM) is served the same
// way: a finalizer_thread made from a host_finalization_source runs the host's ready
// finalizers on this thread instead of palrt's collector's (see host_finalization_source).
//
// The bootstrap starts it through pal's thread factory, after membarrier registration.
//
// Cancellation: no member is a POSIX cancellation point or a Boost interruption point
// (wait_for_pending_finalizers() waits on condition variables with cancellation disabled;
// start() and stop() start and join through pal's thread factory, thread_factory.hpp), as the
// sync waits are not (palrt/sync/wait.hpp): a wait runs its course, to its timeout if the
// finalizers never finish, and a pending pthread_cancel() or boost::thread::interrupt() acts
// at the caller's next cancellation or interruption point after it.
//
// Thread-safe: every member may be called from any thread; the lifecycle calls are
// serialised by one lock.
//
// After fork() (palrt/pal/fork.hpp): in a child, a finalizer_thread made before fork() is the
// parent's, and its thread does not exist there. wait_for_pending_finalizers() returns
// not_running at once; start() and launch() throw pal::forked_child_error (so does making a
// finalizer_thread for a collector of the parent); signal_work(), request_stop() and
// wait_until_running() return at once, stop() returns true at once (nothing to join in the
// child); counters() still reads (without last_exception if its lock is held). What was
// queued for it is never finalized in the child.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "palrt/gc/collector.hpp"
#include "palrt/sync/service_thread.hpp"

namespace palrt::gc {

namespace internal {
class finalizer_thread_access;
struct finalizer_shared;
}  // namespace internal

struct finalizer_options {
  // Finalizers run between two progress reports: each report hands the finalized objects
  // back to the collector in one push and wakes wait_for_pending_finalizers() callers.
  std::size_t batch = 256;
  // Called on the finalizer thread with each exception a finalize() threw, if set. It must
  // not throw (what it throws is swallowed). Without it the first one is reported on stderr
  // and every one is counted.
  std::function<void(std::exception_ptr)> on_exception =
      {};  // "= {}" keeps finalizer_options{.batch = n} free of -Wmissing-field-initializers
};

struct finalizer_counters {
  std::uint64_t finalized = 0;   // finalize() calls that returned or threw
  std::uint64_t exceptions = 0;  // of them, the ones that threw
  std::uint64_t resurrected = 0;
  std::uint64_t pending = 0;       // queued, not run yet
  std::uint64_t left_at_stop = 0;  // queued and not run when the thread last stopped
  std::int64_t longest_finalizer_ns = 0;
  std::int64_t running_finalizer_ns = 0;  // how long the current finalize() has run; 0 if none
  std::string last_exception;             // what() of the last one (or a description)
};

// A host collector's queue of ready finalizers, served by a finalizer_thread.
// run_ready(context) runs, on the finalizer thread, the finalizers the host has ready and
// returns how many it ran (Boehm: GC_invoke_finalizers(), with GC_set_finalize_on_demand(1));
// the thread calls it until it returns 0. The host calls signal_work() when finalizers
// become ready (Boehm: from GC_set_finalizer_notifier's callback). What run_ready throws is
// contained as a finalizer's exception is (counted, on_exception), and the thread calls it
// again. wait_for_pending_finalizers() returns once run_ready() returned 0 in a drain that
// began after the call: every finalizer the host had ready before the call has run. Counted
// per call of run_ready (longest_finalizer_ns, running_finalizer_ns), finalized by its
// results; `pending` and `left_at_stop` stay 0: the queue, and what is left in it, is the
// host's (without a running thread the host runs them itself, as it would without palrt).
struct host_finalization_source {
  std::size_t (*run_ready)(void* context) = nullptr;
  void* context = nullptr;
};

enum class pending_finalizers {
  finalized,  // every object queued before the call has been finalized
  timed_out,
  not_running,  // the finalizer thread is not running (never started, or stopped)
};

class finalizer_thread {
 public:
  explicit finalizer_thread(collector& c, finalizer_options options = {});
  // A finalizer thread for a host's own queue (above). Throws std::invalid_argument for a
  // null run_ready.
  explicit finalizer_thread(host_finalization_source source, finalizer_options options = {});
  // Stops the thread (default timeout) if it runs.
  ~finalizer_thread();

  // Starts the thread and returns once it runs its loop; does nothing if it runs already.
  // Throws pal::thread_start_error or pal::barrier_error, having started nothing.
  void start();
  // The halves of start(), for a caller that overlaps several threads' start-up (the
  // bootstrap): launch() returns once the thread exists (it throws like start()),
  // wait_until_running() once it runs its loop.
  void launch();
  void wait_until_running();

  // Wakes the thread to drain the queue (collect() does this itself; a host source's
  // notifier calls it). Does nothing before the first start.
  void signal_work() noexcept;

  // See the top of the file. `timeout` bounds the wait (not_running is returned at once).
  [[nodiscard]] pending_finalizers wait_for_pending_finalizers(
      std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());

  // Asks the thread to finish without waiting; stop() then joins it.
  void request_stop() noexcept;
  // true if the thread was joined within `timeout` (or never started); false if it missed
  // the deadline and was detached (it finishes on its own; the caller reports it). Either
  // way counters().left_at_stop then says how many queued objects were not finalized by the
  // thread; from then on collect() runs them, and the ones it queues, itself.
  [[nodiscard]] bool stop(std::chrono::nanoseconds timeout = sync::service_thread::default_stop_timeout);

  finalizer_counters counters() const;

 private:
  friend class internal::finalizer_thread_access;
  mutable std::mutex lifecycle_mutex_;
  std::shared_ptr<internal::finalizer_shared> shared_;
  sync::service_thread thread_;
};

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// The sync manager: the worker thread a runtime's PAL needs for posted work, timers and
// process monitoring, and the way to open process handles.
//
// Example:
//   sync::sync_manager& m = rt->services().sync_manager();
//   m.post(sync::work_priority::normal, [] { /* ... */ });     // runs on the worker, later
//   int n = m.invoke(sync::work_priority::high, [] { return 42; });  // runs there, waits
//   auto child = m.open_process(pid);
//   if (sync::wait_one(child).status == sync::wait_status::signalled) child.exit_status();
//
// The worker starts lazily, at the first request that needs it (post, invoke, open_process),
// unless the host starts it eagerly at bootstrap (a thread nobody uses yet is startup cost
// for nothing; upstream CoreCLR is removing its eager startup sync thread for that reason).
// It always starts through pal's thread factory, so after membarrier registration.
//
// Work queue: post() queues a function and returns; invoke() queues it and waits for it,
// returning its result or rethrowing its exception in the caller. The worker runs the oldest
// item of the highest priority first (work_priority.hpp). post_after() runs an item once a
// delay has passed. cancel() removes a posted item that has not started.
// Small items (below) keep that order with the rest: of two untimed items of one priority, one
// posted or invoked after the other's post returned runs after it, whichever path each took. The
// price: a thread preempted in the middle of a small post (between claiming its entry and
// writing it, a few instructions) holds back the normal-priority items after it, and the
// lower priorities, until it runs again.
//
// Allocation and locks: none in steady state. A small item posted at normal priority without
// a delay (a callable of at most 8 bytes, trivially copyable and destructible: a lambda that
// captures one pointer or reference, a function pointer) goes into a ring of 16-byte entries,
// four to a cache line, which is what the worker pays for per item when the callers run on
// another CPU (internal/post_ring.hpp; docs/BENCHMARKS.md, "Packing posted items"). Other
// posted items' queue nodes come from a lock-free
// pool (node_pool.hpp) and a function of up to task::inline_size bytes is stored in the node;
// each calling thread's invoke context (its wait word and queue node) is leased from a
// thread-local single-slot pool (lease_slot.hpp). post() and invoke() hand their node to the
// worker with a compare-exchange, never a lock, and make a futex wake only when the worker is
// parked. A nested invoke (from inside a work item, on the worker) runs the queue until its
// item is done, with a context of its own: it allocates one, by design. A thread may invoke()
// during its exit too, from a thread_local's destructor, whenever that thread_local was made.
//
// Spinning: the worker, out of work, and an invoke() caller, waiting for its result, spin for
// at most max_spin before they park in the kernel, so that back-to-back calls make no system
// call; each adapts its spin to how long its recent waits took (down to well under a
// microsecond when the other side keeps it waiting longer than max_spin). A worker with nothing
// to do for longer than max_spin parks and uses no CPU. The price: work arriving more often
// than every max_spin keeps the worker spinning between items, up to a whole CPU, instead of
// paying a futex wait and wake per item. Measured in palrt-bench invoke (worker_cpu_ns_per_op,
// invoke/idle; docs/BENCHMARKS.md).
//
// An invoke from the worker itself (inside a work item) does not deadlock: it runs the queue,
// in priority order, until its own item has run. A posted item that throws is counted
// (stats().failed_items) and the worker carries on: nobody waits for it.
//
// Stopping: request_stop()/stop() close the queue; items still queued never run: an invoke
// waiting for one throws sync_error(ECANCELED), posted ones are destroyed and counted
// (stats().cancelled_at_stop). After a stop, post/invoke/open_process throw sync_error
// (ESHUTDOWN) until ensure_worker_started() is called again. Processes are watched only while
// the worker runs: a process that exits after the stop is neither reaped nor signalled (its
// handle stays unsignalled, so wait on it with a timeout if the manager may stop first).
//
// Cancellation: invoke() is neither a POSIX cancellation point nor a Boost interruption
// point, the call that starts the worker included (pal/thread_factory.hpp): it returns only
// once the worker is done with the function, which uses the caller's frame, whatever the
// caller's cancellation state; a pending request acts at the caller's next cancellation or
// interruption point after it. The other members wait for nothing but the worker's start, and
// stop() joins it: neither is one either (pal/thread_factory.hpp).
//
// Thread-safe: every member may be called from any thread (stop() not from the worker).
//
// After fork() (palrt/pal/fork.hpp): in a child, a sync manager made before fork() is the
// parent's, and its worker does not exist there. post, post_after, invoke, open_process,
// ensure_worker_started and launch_worker throw sync_error(ESHUTDOWN) ("used in a child after
// fork()"), as after a stop, and queue nothing; cancel() returns false, worker_started()
// false, stop() true at once, request_stop() and wait_until_worker_running() return at once.
// Items queued in the parent never run in the child. A manager made in the child works.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "palrt/sync/task.hpp"
#include "palrt/sync/process_handle.hpp"
#include "palrt/sync/service_thread.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync {

namespace internal {
class sync_manager_access;
class worker_state;
struct work_node;
}  // namespace internal

// Names one posted item of one sync_manager, for that manager's cancel(). Valid as long as
// its sync_manager is. A small item's ticket names its ring entry by the entry's word (its
// position, which never repeats, and kind), with no node.
class work_ticket {
 public:
  work_ticket() noexcept = default;  // names nothing

 private:
  friend class sync_manager;
  work_ticket(const internal::worker_state* owner, internal::work_node* node, std::uint64_t id) noexcept
      : owner_(owner), node_(node), id_(id) {}
  const internal::worker_state* owner_ = nullptr;  // the manager that issued it
  internal::work_node* node_ = nullptr;            // null for a small item's
  // The node's generation when posted (a reused node has another), or a small item's entry
  // word (post_ring.hpp).
  std::uint64_t id_ = 0;
};

class sync_manager {
 public:
  // The longest a waiter spins before it parks (see "Spinning" above). Longer than a futex
  // wake-up of an idle vCPU on the virtual machines palrt is measured on (tens of
  // microseconds, docs/BENCHMARKS.md): a bound below that could never learn to catch a partner
  // that had to be woken, and back-to-back calls would settle into two wake-ups per call.
  static constexpr std::chrono::microseconds max_spin{100};

  sync_manager();
  sync_manager(const sync_manager&) = delete;
  sync_manager& operator=(const sync_manager&) = delete;
  // Stops the worker (default timeout) if it runs.
  ~sync_manager();

  // --- Work ------------------------------------------------------------------------------
  // Queues `fn` (a void() callable) to run on the worker; starts the worker if needed.
  // Throws sync_error(ESHUTDOWN) after a stop, pal::thread_start_error / pal::barrier_error
  // if the worker cannot start, std::bad_alloc; nothing is queued then.
  template <class F>
  work_ticket post(work_priority priority, F&& fn) {
    using D = std::decay_t<F>;
    if constexpr (posts_small<D>) {
      if (priority == work_priority::normal) {
        if (const std::uint64_t kind = small_kind<D>()) {
          std::uint64_t bits = 0;
          std::memcpy(&bits, static_cast<const void*>(std::addressof(fn)), sizeof(D));
          // Empty: the ring was full or closed, and `fn` is untouched for the node path.
          if (const std::optional<work_ticket> t = post_small(kind, bits)) return *t;
        }
      }
    }
    return post_task(priority, std::nullopt, task(std::forward<F>(fn)));
  }
  // The same, to run once `delay` (>= 0, monotonic) has passed; then in priority order with
  // the rest. Also throws sync_error(EINVAL) for a negative delay.
  template <class F>
  work_ticket post_after(std::chrono::nanoseconds delay, work_priority priority, F&& fn) {
    return post_task(priority, delay, task(std::forward<F>(fn)));
  }
  // Removes a posted item that has not started (its function is destroyed unrun): true.
  // false if it ran, runs now, was cancelled already, or the ticket names nothing; false
  // also for a ticket another sync_manager issued, whose item that manager keeps, untouched.
  bool cancel(const work_ticket& ticket) noexcept;

  // Runs `fn` on the worker and waits; returns its result or rethrows its exception. Throws
  // like post(), and sync_error(ECANCELED) if the manager stopped before `fn` ran.
  template <class F>
  std::invoke_result_t<F&> invoke(work_priority priority, F&& fn) {
    using R = std::invoke_result_t<F&>;
    if constexpr (std::is_void_v<R>) {
      auto call = [&fn] { fn(); };
      invoke_function(priority, function_ref(call));
    } else if constexpr (std::is_reference_v<R>) {
      std::remove_reference_t<R>* result = nullptr;
      auto call = [&fn, &result] { result = &fn(); };
      invoke_function(priority, function_ref(call));
      return static_cast<R>(*result);
    } else {
      std::optional<R> result;
      auto call = [&fn, &result] { result.emplace(fn()); };
      invoke_function(priority, function_ref(call));
      return std::move(*result);
    }
  }

  // Whether the calling thread is the worker (inside a work item).
  bool on_worker_thread() const noexcept;

  // --- Processes -------------------------------------------------------------------------
  // A handle to process `pid`, signalled when it exits (process_handle.hpp); starts the
  // worker if needed. Throws sync_error: ESRCH if there is no such process (it exited and
  // was reaped already, or never existed), EINVAL for pid <= 0, ESHUTDOWN after a stop, the
  // errno of pidfd_open/epoll otherwise (ENOSYS before Linux 5.3); like post() for the worker.
  [[nodiscard]] process_handle open_process(pid_t pid);

  // --- Lifecycle -------------------------------------------------------------------------
  // Starts the worker if it is not running yet and returns once it runs its loop; reopens
  // the queue after a stop. Throws pal::thread_start_error or pal::barrier_error, having
  // started nothing.
  void ensure_worker_started();
  // Creates the worker without waiting for it to run (the bootstrap's eager start, which
  // waits for all its service threads at once); throws like the above.
  void launch_worker();
  // Returns once a launched worker runs its loop; at once if none was launched.
  void wait_until_worker_running();
  bool worker_started() const noexcept;
  // Closes the queue and asks the worker to finish without waiting (stop() then joins it).
  void request_stop() noexcept;
  // true if the worker was joined within `timeout` (or never started); false if it missed
  // the deadline and was detached (the caller reports it).
  [[nodiscard]] bool stop(std::chrono::nanoseconds timeout = service_thread::default_stop_timeout);

  struct work_stats {
    std::uint64_t failed_items = 0;       // posted items whose function threw
    std::uint64_t cancelled_at_stop = 0;  // items that never ran because of a stop
  };
  work_stats stats() const noexcept;

 private:
  friend class internal::sync_manager_access;
  work_ticket post_task(work_priority priority, std::optional<std::chrono::nanoseconds> delay, task fn);

  // Small items (internal/post_ring.hpp): a callable that is run from a copy of its bytes.
  template <class D>
  static constexpr bool posts_small =
      sizeof(D) <= sizeof(std::uint64_t) &&
      alignof(D) <= alignof(std::uint64_t) && std::is_trivially_copyable_v<D>&& std::is_trivially_destructible_v<D>;
  template <class D>
  static void run_small(std::uint64_t bits) {
    // A trivially copyable object's bytes copied into storage are that object (C++20's
    // implicit object creation), so it runs from a copy as it would from the original.
    alignas(D) unsigned char storage[sizeof(D)];
    std::memcpy(storage, &bits, sizeof(D));
    (*std::launder(reinterpret_cast<D*>(storage)))();
  }
  // D's kind, registered the first time D is posted; 0 once every kind is taken (D then uses
  // nodes).
  template <class D>
  static std::uint64_t small_kind() noexcept {
    static const std::uint64_t kind = register_small_kind(&run_small<D>);
    return kind;
  }
  static std::uint64_t register_small_kind(void (*run)(std::uint64_t)) noexcept;
  // Queues a small item at normal priority in the ring; empty (nothing queued) if the ring is
  // full or closed. Throws like post() otherwise.
  std::optional<work_ticket> post_small(std::uint64_t kind, std::uint64_t bits);
  void invoke_function(work_priority priority, function_ref fn);
  // The lazy start: throws sync_error(ESHUTDOWN) after a stop, or what the start throws.
  void start_for_work(const char* operation);
  void start_locked();
  void request_stop_locked() noexcept;

  std::shared_ptr<internal::worker_state> state_;  // co-owned by the worker's loop
  mutable std::mutex start_mutex_;
  bool stopped_ = false;                   // guarded by start_mutex_
  std::atomic<bool> worker_ready_{false};  // started and not stopped: the lazy-start fast path
  service_thread worker_;
};

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
#include "palrt/sync/sync_manager.hpp"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>

#include "palrt/core/clock.h"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/sync/internal/process_object.hpp"
#include "palrt/sync/internal/sync_manager_access.hpp"
#include "palrt/sync/internal/waits_access.hpp"
#include "palrt/sync/internal/worker_state.hpp"

namespace palrt::sync {
namespace {

// ESHUTDOWN, which std::errc has no name for: "cannot send after transport endpoint shutdown".
constexpr std::errc stopped_error = static_cast<std::errc>(ESHUTDOWN);

// A manager made before fork(), used in the child: its worker does not exist there and its
// locks may be held for good, so every entry point refuses before it takes one.
[[noreturn, gnu::cold]] void refuse_in_forked_child(const char* operation) {
  throw sync_error(stopped_error, std::string("sync_manager::") + operation +
                                      ": used in a child after fork(); the sync manager and its worker belong to the "
                                      "parent process (make a new one, or bootstrap() a runtime, in the child)");
}

}  // namespace

sync_manager::sync_manager()
    : state_(std::make_shared<internal::worker_state>()),
      worker_("palrt-syncmgr", [state = state_](const std::atomic<bool>& stop) { state->run(stop); }) {}

sync_manager::~sync_manager() {
  // In a fork()ed child the state may be half updated by a thread that is not there: it is
  // kept, untouched, rather than destroyed.
  if (state_->made.forked()) pal::internal::keep_until_exit(state_);
  (void)stop();  // whether the worker was joined: a destructor has nobody to tell
}

// --- Lifecycle -------------------------------------------------------------------------------

void sync_manager::start_locked() {
  // A worker asked to stop but not joined yet (request_stop() alone) finishes first; one that
  // overstays is detached, as stop() would.
  if (stopped_ && worker_.started()) (void)worker_.join();
  if (worker_.started()) return;
  state_->inbox.reopen();
  // The ring goes to the worker launched now, unless a detached one still holds it: then this
  // worker serves small items through nodes (post_ring.hpp).
  const bool ring_handed = state_->ring.reopen_if_free();
  state_->ring_for_next_worker.store(ring_handed, std::memory_order_seq_cst);
  stopped_ = false;
  try {
    worker_.launch();
  } catch (...) {
    if (ring_handed) {
      state_->ring_for_next_worker.store(false, std::memory_order_seq_cst);
      state_->ring.unclaim();  // what is queued there waits for the next worker
    }
    throw;
  }
  // The service loop runs its work once per wake-up; the worker's work is its own loop, which
  // returns only at a stop. One wake-up enters it.
  worker_.wake();
}

void sync_manager::ensure_worker_started() {
  if (state_->made.forked()) refuse_in_forked_child("ensure_worker_started");
  std::lock_guard lock(start_mutex_);
  start_locked();
  worker_.wait_until_running();
  // release: a poster that sees it (acquire) sees the started worker and the open queue.
  worker_ready_.store(true, std::memory_order_release);
}

void sync_manager::launch_worker() {
  if (state_->made.forked()) refuse_in_forked_child("launch_worker");
  std::lock_guard lock(start_mutex_);
  start_locked();
  worker_ready_.store(true, std::memory_order_release);
}

void sync_manager::wait_until_worker_running() {
  if (state_->made.forked()) return;
  std::lock_guard lock(start_mutex_);
  worker_.wait_until_running();
}

bool sync_manager::worker_started() const noexcept {
  if (state_->made.forked()) return false;
  std::lock_guard lock(start_mutex_);
  return worker_.started();
}

void sync_manager::request_stop() noexcept {
  if (state_->made.forked()) return;
  std::lock_guard lock(start_mutex_);
  request_stop_locked();
}

void sync_manager::request_stop_locked() noexcept {
  worker_ready_.store(false, std::memory_order_relaxed);  // relaxed: posters re-check under the locks
  stopped_ = true;
  state_->ring.close();  // first: the inbox's last head says both are closed (W1 of fence pair W)
  state_->inbox.close();
  worker_.request_stop();
  // After the close (W1 of worker_state.hpp's fence pair W): a worker about to park sees the
  // inbox closed, or is seen parked here.
  state_->wake_if_sleeping();
}

bool sync_manager::stop(std::chrono::nanoseconds timeout) {
  if (state_->made.forked()) return true;  // no worker of it in this process
  // One critical section for both halves: a start racing the stop either comes before it
  // (and is stopped) or after it (and starts a new worker), never in between.
  std::lock_guard lock(start_mutex_);
  request_stop_locked();
  return worker_.join(timeout);
}

void sync_manager::start_for_work(const char* operation) {
  std::lock_guard lock(start_mutex_);
  if (stopped_) {
    throw sync_error(stopped_error, std::string("sync_manager::") + operation + ": the sync manager has been stopped");
  }
  start_locked();
  worker_ready_.store(true, std::memory_order_release);
}

sync_manager::work_stats sync_manager::stats() const noexcept {
  return {state_->failed_items.load(std::memory_order_relaxed),
          state_->cancelled_at_stop.load(std::memory_order_relaxed)};
}

bool sync_manager::on_worker_thread() const noexcept { return state_->on_worker(); }

// --- Work ------------------------------------------------------------------------------------

work_ticket sync_manager::post_task(work_priority priority, std::optional<std::chrono::nanoseconds> delay, task fn) {
  // One relaxed load (fork_stamp): cheap beside the pushes below.
  if (state_->made.forked()) [[unlikely]]
    refuse_in_forked_child(delay ? "post_after" : "post");
  if (delay && delay->count() < 0) {
    throw sync_error(std::errc::invalid_argument,
                     "sync_manager::post_after: negative delay (" + std::to_string(delay->count()) + " ns)");
  }
  if (static_cast<std::size_t>(priority) >= work_priority_count) {
    throw sync_error(std::errc::invalid_argument,
                     "sync_manager::post: no such priority " + std::to_string(static_cast<int>(priority)));
  }
  // acquire: pairs with the release in the starts.
  if (!worker_ready_.load(std::memory_order_acquire)) start_for_work("post");
  internal::worker_state& s = *state_;
  internal::work_node& n = s.pool.take();  // a new generation of the node: ours alone
  n.priority = priority;
  n.invoke = nullptr;
  n.posted = std::move(fn);
  n.timed = delay.has_value();
  // Before the push: the order with the small items (post_ring.hpp).
  n.ring_stamp = !delay && priority == work_priority::normal ? s.ring.stamp() : 0;
  if (delay) {
    const std::int64_t now = palrt_monotonic_ns();
    // A delay past the end of the clock's range is "never" in practice: clamp, not overflow.
    n.due_ns = now + std::min<std::int64_t>(delay->count(), std::numeric_limits<std::int64_t>::max() - now);
  }
  n.mark_queued();
  // Before the push: once pushed, the node may run, go back to the pool and serve another post.
  const work_ticket ticket(&s, &n, n.generation);
  if (!s.inbox.push(n)) {
    n.posted.reset();
    s.pool.give(n);
    throw sync_error(stopped_error, "sync_manager::post: the sync manager has been stopped");
  }
  s.wake_if_sleeping();
  return ticket;
}

std::optional<work_ticket> sync_manager::post_small(std::uint64_t kind, std::uint64_t bits) {
  // One relaxed load (fork_stamp): cheap beside the claim below.
  if (state_->made.forked()) [[unlikely]]
    refuse_in_forked_child("post");
  // acquire: pairs with the release in the starts.
  if (!worker_ready_.load(std::memory_order_acquire)) start_for_work("post");
  internal::worker_state& s = *state_;
  const std::uint64_t word = s.ring.push(kind, bits);
  if (!word) return std::nullopt;  // full or closed: the node path queues it, or refuses
  s.wake_if_sleeping();
  return work_ticket(&s, nullptr, word);
}

std::uint64_t sync_manager::register_small_kind(void (*run)(std::uint64_t)) noexcept {
  return internal::register_small_task_kind(run);
}

bool sync_manager::cancel(const work_ticket& ticket) noexcept {
  if (state_->made.forked()) return false;  // the parent's manager, in a child (fork.hpp)
  internal::worker_state& s = *state_;
  if (ticket.owner_ != &s) return false;  // another manager's item: never touch it here
  // A small item's ring entry (post_ring.hpp); a default ticket's word 0 names nothing.
  if (!ticket.node_) return ticket.id_ != 0 && s.ring.cancel(ticket.id_);
  internal::work_node& n = *ticket.node_;
  // The pool never frees a node, so the claim word of a reused node is safe to read; its
  // generation no longer matches and the compare-exchange fails (work_node.hpp).
  if (!n.try_cancel(ticket.id_)) return false;
  n.posted.reset();  // the function's captures may do anything: no state of ours depends on it
  if (n.finish_cancel(ticket.id_)) s.pool.give(n);  // the worker met it already
  // A worker parked until this timer's due time wakes then, finds nothing, and parks again.
  return true;
}

void sync_manager::invoke_function(work_priority priority, function_ref fn) {
  if (state_->made.forked()) [[unlikely]]
    refuse_in_forked_child("invoke");
  if (static_cast<std::size_t>(priority) >= work_priority_count) {
    throw sync_error(std::errc::invalid_argument,
                     "sync_manager::invoke: no such priority " + std::to_string(static_cast<int>(priority)));
  }
  if (!worker_ready_.load(std::memory_order_acquire)) start_for_work("invoke");
  internal::worker_state& s = *state_;
  std::unique_ptr<internal::invoke_context> call = internal::lease_invoke_context();
  call->word.store(internal::invoke_context::pending, std::memory_order_relaxed);  // relaxed: published by the push
  call->fn = fn;
  call->error = nullptr;
  call->node.priority = priority;
  call->node.invoke = call.get();
  call->node.timed = false;
  // Before the push: the order with the small items (post_ring.hpp).
  call->node.ring_stamp = priority == work_priority::normal ? s.ring.stamp() : 0;
  call->node.mark_queued();  // generation 0 for good: no ticket names an invoke
  if (!s.inbox.push(call->node)) {
    internal::return_invoke_context(std::move(call));
    throw sync_error(stopped_error, "sync_manager::invoke: the sync manager has been stopped");
  }
  if (s.on_worker()) {
    s.pump_until(*call);
  } else {
    s.wake_if_sleeping();
    call->wait_until_done();
  }
  std::exception_ptr error = std::move(call->error);
  internal::return_invoke_context(std::move(call));
  if (error) std::rethrow_exception(error);
}

// --- Processes -------------------------------------------------------------------------------

process_handle sync_manager::open_process(pid_t pid) {
  if (state_->made.forked()) refuse_in_forked_child("open_process");
  if (!worker_ready_.load(std::memory_order_acquire)) start_for_work("open_process");
  std::shared_ptr<internal::process_object> process = internal::process_object::open(pid);
  process_handle h = internal::waits_access::make_process_handle(process);
  state_->processes.watch(std::move(process));
  // The worker may sleep on its futex, not yet in epoll: wake it so that it sleeps there next.
  state_->wake();
  return h;
}

// --- Test access -----------------------------------------------------------------------------

namespace internal {

std::uint64_t sync_manager_access::node_allocations(const sync_manager& m) noexcept {
  return m.state_->pool.allocations();
}

std::uint64_t sync_manager_access::items_waiting(const sync_manager& m) noexcept {
  return m.state_->inbox.count_waiting() + m.state_->ring.waiting();
}

void sync_manager_access::before_park(sync_manager& m, void (*hook)(void*), void* arg) noexcept {
  m.state_->before_park_arg_for_test = arg;
  m.state_->before_park_for_test.store(hook, std::memory_order_relaxed);  // relaxed: see its declaration
}

void sync_manager_access::between_ring_and_inbox_looks(void (*hook)()) noexcept {
  work_queue::between_looks_for_test.store(hook, std::memory_order_relaxed);  // relaxed: see its declaration
}

std::uint64_t sync_manager_access::ring_capacity() noexcept { return post_ring::capacity; }

std::uint64_t sync_manager_access::ring_items_waiting(const sync_manager& m) noexcept {
  return m.state_->ring.waiting();
}

std::uint64_t sync_manager_access::node_pool_bound(std::uint64_t most_queued) noexcept {
  return node_pool::bound(most_queued + static_cast<std::uint64_t>(worker_state::spent_batch));
}

std::uint64_t sync_manager_access::parks(const sync_manager& m) noexcept {
  return m.state_->parks.load(std::memory_order_relaxed);  // relaxed: tests poll it
}

std::uint64_t sync_manager_access::invoke_context_allocations() noexcept {
  return internal::invoke_context_allocations();
}

}  // namespace internal

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
#include "palrt/gc/finalizer_thread.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <stdexcept>

#include "palrt/core/clock.h"
#include "palrt/pal/fork.hpp"
#include "palrt/pal/internal/cancellation.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/gc/internal/collector_state.hpp"

namespace palrt::gc {

namespace internal {

// What the finalizer thread uses, co-owned by the thread (through its work function) and by
// the finalizer_thread object: a detached thread keeps it alive.
struct finalizer_shared {
  finalizer_shared(std::shared_ptr<collector_state> c, host_finalization_source h, finalizer_options o)
      : collector(std::move(c)), host(h), options(std::move(o)) {
    if (options.batch == 0) options.batch = 1;
  }
  // One of the two: palrt's collector, or a host's queue.
  const std::shared_ptr<collector_state> collector;
  const host_finalization_source host;
  finalizer_options options;
  // A host queue's drains: wait_for_pending_finalizers() and signal_work() each raise
  // `requested`; a drain that found the queue empty publishes the `requested` it read before
  // its last, empty, call as `completed`.
  std::atomic<std::uint64_t> host_requested{0};
  std::mutex host_lock;
  std::condition_variable host_done;
  std::uint64_t host_completed = 0;  // under host_lock
  bool host_serving = false;         // under host_lock: the thread runs (waiters give up if not)
  // In a fork()ed child the thread is its parent's and does not exist: every entry point
  // returns at once there, before it takes a lock (finalizer_thread.hpp, "After fork()").
  const pal::internal::fork_stamp made;
  // relaxed, all: counters for reports; nothing is ordered by them.
  std::atomic<std::uint64_t> finalized{0};
  std::atomic<std::uint64_t> exceptions{0};
  std::atomic<std::uint64_t> resurrected{0};
  std::atomic<std::uint64_t> left_at_stop{0};
  std::atomic<std::int64_t> longest_ns{0};
  std::atomic<std::int64_t> running_since_ns{0};  // 0: no finalize() running
  mutable std::mutex exception_lock;
  std::string last_exception;
  bool reported_one = false;

  void drain(const std::atomic<bool>& stop);
  void drain_host(const std::atomic<bool>& stop);
  void set_host_serving(bool serving);
  void report_progress(collector_state::chain_ref& finished, std::size_t n);
  void record(std::exception_ptr error);
};

namespace {
// The finalizer_shared of the finalizer thread this is (null on every other thread).
constinit thread_local finalizer_shared* current_finalizer = nullptr;
}  // namespace

void finalizer_shared::drain(const std::atomic<bool>& stop) {
  current_finalizer = this;
  finalization_queue& queue = collector->finalization;
  std::size_t since_report = 0;
  collector_state::chain_ref finished;
  // One clock read per object: each finalizer's time runs from the previous one's end.
  std::int64_t mark = palrt_monotonic_ns();
  // One object at a time, oldest first: the thread never holds an object it has not started,
  // so a stop that misses its deadline inside a finalizer leaves every other object in the
  // queue, for collect() to run at once (finalizer_thread.hpp, "Shutdown"), and this thread,
  // once that finalizer returns, sees its stop request here and takes nothing more.
  // acquire, each: pairs with request_stop()'s release (service_thread).
  while (!stop.load(std::memory_order_acquire)) {
    bool emptied = false;
    object* o = queue.take_one(emptied);  // O(1) under the queue's lock: collect() never waits long
    if (!o) break;
    running_since_ns.store(mark, std::memory_order_relaxed);
    std::exception_ptr error;
    const auto result = finalization_access::run(*o, error);
    const std::int64_t now = palrt_monotonic_ns();
    running_since_ns.store(0, std::memory_order_relaxed);
    if (now - mark > longest_ns.load(std::memory_order_relaxed))
      longest_ns.store(now - mark, std::memory_order_relaxed);
    mark = now;
    if (result == finalization_access::outcome::resurrected) resurrected.fetch_add(1, std::memory_order_relaxed);
    if (error) record(error);
    finalization_access::finished(*o, result, finished);  // o may be freed once handed back
    // Progress in batches: one hand-back to the collector and one completion (which wakes
    // wait_for_pending_finalizers() callers) per `batch` objects, and whenever the queue runs
    // empty.
    if (++since_report == options.batch || emptied) {
      report_progress(finished, since_report);
      since_report = 0;
    }
  }
  if (since_report > 0) report_progress(finished, since_report);  // stopped mid-batch
}

void finalizer_shared::drain_host(const std::atomic<bool>& stop) {
  current_finalizer = this;
  while (!stop.load(std::memory_order_acquire)) {
    // acquire: pairs with the raise in wait/signal (what the host queued before it is seen by
    // the run_ready() below, which the host's own queue lock orders in any case).
    const std::uint64_t seen = host_requested.load(std::memory_order_acquire);
    const std::int64_t start = palrt_monotonic_ns();
    running_since_ns.store(start, std::memory_order_relaxed);
    std::size_t ran = 0;
    bool threw = false;
    try {
      ran = host.run_ready(host.context);
    } catch (...) {
      threw = true;
      record(std::current_exception());
    }
    const std::int64_t took = palrt_monotonic_ns() - start;
    running_since_ns.store(0, std::memory_order_relaxed);
    if (took > longest_ns.load(std::memory_order_relaxed)) longest_ns.store(took, std::memory_order_relaxed);
    finalized.fetch_add(ran, std::memory_order_relaxed);
    if (ran > 0 || threw) continue;  // more may be ready: run_ready() again until it finds none
    {
      std::lock_guard lock(host_lock);
      host_completed = std::max(host_completed, seen);
    }
    host_done.notify_all();
    if (host_requested.load(std::memory_order_acquire) == seen) break;  // nothing asked since
  }
}

void finalizer_shared::set_host_serving(bool serving) {
  {
    std::lock_guard lock(host_lock);
    host_serving = serving;
  }
  host_done.notify_all();
}

void finalizer_shared::report_progress(collector_state::chain_ref& finished, std::size_t n) {
  finalization_access::hand_back(*collector, finished);
  finalized.fetch_add(n, std::memory_order_relaxed);
  collector->finalization.complete(n);
}

void finalizer_shared::record(std::exception_ptr error) {
  exceptions.fetch_add(1, std::memory_order_relaxed);
  std::string what = finalization_access::describe(error);
  bool first;
  {
    std::lock_guard lock(exception_lock);
    last_exception = what;
    first = !reported_one;
    reported_one = true;
  }
  if (options.on_exception) {
    try {
      options.on_exception(error);
    } catch (...) {
      // The host's handler must not throw; the finalizer thread goes on regardless.
    }
  } else if (first) {
    std::fprintf(stderr,
                 "palrt: a finalizer threw (%s); the finalizer thread goes on (further ones are only counted)\n",
                 what.c_str());
  }
}

}  // namespace internal

namespace {
void wake_finalizer(void* thread) { static_cast<sync::service_thread*>(thread)->wake(); }
}  // namespace

namespace {
std::shared_ptr<internal::collector_state> collector_of_this_process(collector& c) {
  std::shared_ptr<internal::collector_state> state = internal::collector_access::state(c);
  if (state->made.forked()) throw pal::forked_child_error("finalizer_thread: the collector");
  return state;
}
}  // namespace

finalizer_thread::finalizer_thread(collector& c, finalizer_options options)
    : shared_(std::make_shared<internal::finalizer_shared>(collector_of_this_process(c), host_finalization_source{},
                                                           std::move(options))),
      thread_("palrt-finalizer", [shared = shared_](const std::atomic<bool>& stop) { shared->drain(stop); }) {}

namespace {
host_finalization_source checked(host_finalization_source source) {
  if (!source.run_ready)
    throw std::invalid_argument("palrt: finalizer_thread: a host_finalization_source needs run_ready");
  return source;
}
}  // namespace

finalizer_thread::finalizer_thread(host_finalization_source source, finalizer_options options)
    : shared_(std::make_shared<internal::finalizer_shared>(nullptr, checked(source), std::move(options))),
      thread_("palrt-finalizer", [shared = shared_](const std::atomic<bool>& stop) { shared->drain_host(stop); }) {}

// Whether the thread was joined: a destructor has nobody to tell (a detached thread owns its
// share of the state, see stop()).
finalizer_thread::~finalizer_thread() { (void)stop(); }

void finalizer_thread::start() {
  launch();
  wait_until_running();
}

void finalizer_thread::launch() {
  if (shared_->made.forked()) throw pal::forked_child_error("finalizer_thread::start");
  std::lock_guard lock(lifecycle_mutex_);
  if (thread_.started()) return;
  thread_.launch();
  if (!shared_->collector) {
    shared_->set_host_serving(true);
    thread_.wake();  // what the host readied before the thread existed
    return;
  }
  // The queue wakes the thread under its own lock, so clearing the consumer (request_stop)
  // guarantees no wake-up is in flight when the thread is relaunched or destroyed.
  internal::finalization_queue& queue = shared_->collector->finalization;
  queue.set_consumer(&wake_finalizer, &thread_);
  if (queue.enqueued() > queue.completed()) thread_.wake();  // queued before the thread existed
}

void finalizer_thread::wait_until_running() {
  if (shared_->made.forked()) return;
  std::lock_guard lock(lifecycle_mutex_);
  thread_.wait_until_running();
}

void finalizer_thread::signal_work() noexcept {
  if (shared_->made.forked()) return;
  if (!shared_->collector) shared_->host_requested.fetch_add(1, std::memory_order_release);
  std::lock_guard lock(lifecycle_mutex_);
  thread_.wake();
}

namespace {
std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  return timeout >= std::chrono::steady_clock::time_point::max() - now
             ? std::chrono::steady_clock::time_point::max()
             : now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
}
}  // namespace

pending_finalizers finalizer_thread::wait_for_pending_finalizers(std::chrono::nanoseconds timeout) {
  if (shared_->made.forked()) return pending_finalizers::not_running;
  if (internal::current_finalizer == shared_.get()) return pending_finalizers::finalized;
  // Not a cancellation point (pal/internal/cancellation.hpp), as the sync waits are not: the
  // condition variable waits below would be one, and unwound there a waiter would leave the
  // queue's count of waiters raised for good.
  const pal::internal::cancellation_disabled no_cancellation;
  if (!shared_->collector) {
    internal::finalizer_shared& s = *shared_;
    std::uint64_t target;
    {
      std::lock_guard lock(lifecycle_mutex_);
      if (!thread_.started()) return pending_finalizers::not_running;
      // release: pairs with the drain's acquire; the drain that reads it starts after this.
      target = s.host_requested.fetch_add(1, std::memory_order_release) + 1;
      thread_.wake();
    }
    std::unique_lock lock(s.host_lock);
    const bool done = s.host_done.wait_until(lock, deadline_after(timeout),
                                             [&] { return s.host_completed >= target || !s.host_serving; });
    if (s.host_completed >= target) return pending_finalizers::finalized;
    return done ? pending_finalizers::not_running : pending_finalizers::timed_out;
  }
  internal::finalization_queue& queue = shared_->collector->finalization;
  {
    std::lock_guard lock(lifecycle_mutex_);
    if (!thread_.started() || !queue.has_consumer()) return pending_finalizers::not_running;
  }
  // Every object queued before this call has a sequence number <= target.
  const std::uint64_t target = queue.enqueued();
  if (queue.completed() >= target) return pending_finalizers::finalized;
  // Stay awake briefly first (yielding, so a finalizer queued on this CPU still runs): a
  // short drain then ends without this CPU going idle, whose wake-up costs tens of
  // microseconds on a virtual machine (see pal::wake_event::wait_for).
  for (const std::int64_t until = palrt_monotonic_ns() + 50'000; palrt_monotonic_ns() < until;) {
    if (queue.completed() >= target) return pending_finalizers::finalized;
    sched_yield();
  }
  if (queue.wait_until_completed(target, deadline_after(timeout))) return pending_finalizers::finalized;
  return queue.has_consumer() ? pending_finalizers::timed_out : pending_finalizers::not_running;
}

void finalizer_thread::request_stop() noexcept {
  if (shared_->made.forked()) return;
  std::lock_guard lock(lifecycle_mutex_);
  if (shared_->collector) shared_->collector->finalization.clear_consumer();
  thread_.request_stop();
}

bool finalizer_thread::stop(std::chrono::nanoseconds timeout) {
  if (shared_->made.forked()) return true;  // no thread of it in this process
  std::lock_guard lock(lifecycle_mutex_);
  if (!shared_->collector) {
    const bool joined = thread_.stop(timeout);
    shared_->set_host_serving(false);  // waiters return not_running
    return joined;
  }
  internal::finalization_queue& queue = shared_->collector->finalization;
  queue.clear_consumer();
  const bool started = thread_.started();
  const bool joined = thread_.stop(timeout);
  if (started) shared_->left_at_stop.store(queue.enqueued() - queue.completed(), std::memory_order_relaxed);
  return joined;
}

finalizer_counters finalizer_thread::counters() const {
  const internal::finalizer_shared& s = *shared_;
  finalizer_counters c;
  c.finalized = s.finalized.load(std::memory_order_relaxed);
  c.exceptions = s.exceptions.load(std::memory_order_relaxed);
  c.resurrected = s.resurrected.load(std::memory_order_relaxed);
  c.pending = s.collector ? s.collector->finalization.enqueued() - s.collector->finalization.completed() : 0;
  c.left_at_stop = s.left_at_stop.load(std::memory_order_relaxed);
  c.longest_finalizer_ns = s.longest_ns.load(std::memory_order_relaxed);
  const std::int64_t since = s.running_since_ns.load(std::memory_order_relaxed);
  c.running_finalizer_ns = since ? std::max<std::int64_t>(0, palrt_monotonic_ns() - since) : 0;
  // In a fork()ed child the lock may be held for good: last_exception only if it is free.
  std::unique_lock lock(s.exception_lock, std::defer_lock);
  if (!s.made.forked())
    lock.lock();
  else if (!lock.try_lock())
    return c;
  c.last_exception = s.last_exception;
  return c;
}

}  // namespace palrt::gc

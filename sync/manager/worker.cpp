// SPDX-License-Identifier: MIT
// The sync manager's worker loop: runs queued work in priority order, fires timers, and
// watches processes (internal/worker_state.hpp states the park protocol).
#include <time.h>

#include <cerrno>
#include <limits>
#include <optional>

#include "palrt/core/clock.h"
#include "palrt/pal/internal/futex.hpp"
#include "palrt/sync/handle.hpp"
#include "palrt/sync/internal/adaptive_spin.hpp"
#include "palrt/sync/internal/worker_state.hpp"

namespace palrt::sync::internal {

// What the worker thread keeps for itself while its loop runs: which state it serves, its
// own queue, its spin budget, and the nodes of items it ran, handed back to the pool in
// batches (one pool compare-exchange per batch instead of one per item, on the line posters
// take nodes from). On the loop's stack, so a detached worker and its successor never share
// it.
struct worker_local {
  const worker_state* state = nullptr;
  // The small-item ring, if it was handed to this worker at its launch (post_ring.hpp: one
  // consumer at a time); null for a worker launched while a detached one still held it.
  post_ring* ring = nullptr;
  work_queue queue;
  adaptive_spin spin;
  work_node* spent = nullptr;  // linked through pool_free_next (indices), newest first
  work_node* spent_tail = nullptr;
  int spent_count = 0;
};

namespace {

thread_local worker_local* current_local = nullptr;

// Processes are checked at least this often while the queue never empties, so a busy worker
// still notices exits (one non-blocking epoll_wait per this many items).
constexpr int items_between_process_checks = 64;

timespec to_timespec(std::int64_t ns) noexcept {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

bool worker_state::on_worker() const noexcept { return current_local && current_local->state == this; }

void worker_state::return_spent() noexcept {
  worker_local& local = *current_local;
  if (!local.spent) return;
  pool.give_chain(*local.spent, *local.spent_tail);
  local.spent = local.spent_tail = nullptr;
  local.spent_count = 0;
}

void worker_state::wake() noexcept {
  // seq_cst: part of W1' (worker_state.hpp); only one of many posters sees `parked` here.
  const std::uint32_t was = sleep_word.exchange(running, std::memory_order_seq_cst);
  if (was == parked_on_futex) {
    pal::internal::futex_wake(sleep_word, 1);
  } else if (was == parked_in_epoll) {
    processes.poke();
  }
}

void worker_state::run(const std::atomic<bool>& stop) {
  worker_local local;
  local.state = this;
  if (ring_for_next_worker.exchange(false, std::memory_order_seq_cst)) local.ring = &ring;
  worker_local* const outer = current_local;
  current_local = &local;
  int since_process_check = 0;
  // acquire: what the stopper wrote before request_stop() is visible once we see it.
  while (!stop.load(std::memory_order_acquire)) {
    if (run_one() || spin_for_work()) {
      // Items found by the spin count too: a stream that never lets the worker park must
      // not keep it from noticing exits.
      if (++since_process_check >= items_between_process_checks && processes.active()) {
        since_process_check = 0;
        processes.wait_and_handle(timespec{0, 0});
      }
      continue;
    }
    since_process_check = 0;  // sleep() looks at the processes (in epoll) when any are watched
    return_spent();           // before parking: posters may need them
    sleep();
    local.spin.parked();
  }
  return_spent();
  cancel_all(local);
  current_local = outer;
}

void worker_state::pump_until(invoke_context& context) {
  // Our own item is queued until it runs, so there is always something ready until then.
  // acquire: pairs with complete()'s release (the item may have run in a deeper pump).
  while (context.word.load(std::memory_order_acquire) != invoke_context::done) {
    if (!run_one()) sleep();  // only timers are due later: not our item; wait for them
  }
}

bool worker_state::spin_for_work() {
  // A poster that keeps the worker busy usually queues its next item within a microsecond of
  // the worker running dry, and an invoke caller calls again as soon as its result is back:
  // a park then costs a futex wait here and a futex wake there (tens of microseconds on a
  // virtual machine). The spin reads the inbox heads only (no write), so it does not slow the
  // posters it waits for more than a look at their line costs.
  if (!current_local->spin.spin([this] { return work_visible(); })) return false;
  return run_one();
}

void worker_state::skip(work_node& n) noexcept {
  if (n.skip(n.generation)) pool.give(n);
}

bool worker_state::work_visible() const noexcept {
  const post_ring* const r = current_local->ring;
  return inbox.has_any() || (r && r->ready());
}

bool worker_state::run_one() {
  worker_local& local = *current_local;
  for (;;) {
    // The clock only matters with timers queued (a vDSO read is ~20 ns, per item).
    const ready_item next =
        local.queue.pop_ready(inbox, local.queue.has_timers() ? palrt_monotonic_ns() : 0, local.ring);
    if (next.from_ring) {
      std::uint64_t kind = 0, bits = 0;
      switch (local.ring->take(kind, bits)) {
        case post_ring::taken_item::item: run_small(kind, bits); return true;
        case post_ring::taken_item::skipped: continue;   // cancelled: it never runs
        case post_ring::taken_item::none: return false;  // not reached: pop_ready saw it published, and only we take
      }
    }
    work_node* const n = next.node;
    if (!n) return false;
    if (n->try_claim(n->generation)) {
      run_item(*n);
      return true;
    }
    skip(*n);  // cancelled: it never runs; nothing of it is touched after this
  }
}

void worker_state::run_item(work_node& n) noexcept {
  if (invoke_context* call = n.invoke) {
    try {
      call->fn();
    } catch (...) {
      call->error = std::current_exception();
    }
    call->complete();  // the caller owns the node; nothing of it is touched after this
    return;
  }
  try {
    n.posted();
  } catch (...) {
    // Nobody waits for a posted item: its exception is contained and counted, as the
    // finalizer does with finalizers.
    failed_items.fetch_add(1, std::memory_order_relaxed);
  }
  n.posted.reset();                      // its captures go now, outside every lock
  worker_local& local = *current_local;  // run_item runs on the worker only
  // relaxed: the chain is published by give_chain's release. The tail's link is set there.
  n.pool_free_next.store(local.spent ? local.spent->pool_index : 0, std::memory_order_relaxed);
  if (!local.spent) local.spent_tail = &n;
  local.spent = &n;
  if (++local.spent_count >= spent_batch) return_spent();
}

void worker_state::run_small(std::uint64_t kind, std::uint64_t bits) noexcept {
  try {
    small_task_function(kind)(bits);
  } catch (...) {
    failed_items.fetch_add(1, std::memory_order_relaxed);  // as run_item's
  }
}

std::int64_t worker_state::next_due_ns(worker_local& local) noexcept {
  while (work_node* const t = local.queue.first_timer()) {
    // relaxed: a state that left `queued` never returns to it within a generation, so a
    // cancelled timer seen here is cancelled for good; one cancelled just after the look
    // costs one early wake-up at its due time.
    if ((t->claim.load(std::memory_order_relaxed) & 7) == work_node::queued) return t->due_ns;
    local.queue.remove_first_timer();
    skip(*t);
  }
  return std::numeric_limits<std::int64_t>::max();
}

void worker_state::sleep() noexcept {
  worker_local& local = *current_local;
  // Posters may reuse what we ran while we are parked (and a poster that found the ring full
  // used a node meanwhile: still right, only slower).
  if (local.ring) local.ring->publish_head();
  const bool epoll = processes.active();
  const std::int64_t due = next_due_ns(local);
  // seq_cst: W2 of fence pair W (worker_state.hpp).
  sleep_word.store(epoll ? parked_in_epoll : parked_on_futex, std::memory_order_seq_cst);
  // W2': the inbox loads are seq_cst. A process watched since `epoll` was read: its
  // open_process() may have found us running and not woken us, so look again rather than
  // park on the futex (process_monitor.hpp).
  if (work_visible() || inbox.closed() || epoll != processes.active()) {
    // relaxed: we do not park after all; a poster that still reads the old value only makes
    // a needless wake().
    sleep_word.store(running, std::memory_order_relaxed);
    return;
  }
  const bool timed = due != std::numeric_limits<std::int64_t>::max();
  if (timed && due <= palrt_monotonic_ns()) {
    sleep_word.store(running, std::memory_order_relaxed);  // relaxed: as above
    return;
  }
  if (void (*const hook)(void*) = before_park_for_test.load(std::memory_order_relaxed)) hook(before_park_arg_for_test);
  parks.fetch_add(1, std::memory_order_relaxed);  // relaxed: see its declaration
  if (epoll) {
    std::optional<timespec> timeout;
    if (timed) timeout = to_timespec(std::max<std::int64_t>(0, due - palrt_monotonic_ns()));
    processes.wait_and_handle(timeout);
  } else {
    // Returns at once if a poster already set the word back to running. EINTR, ETIMEDOUT
    // and spurious wake-ups all lead back to the loop, which looks again.
    pal::internal::futex_wait(sleep_word, parked_on_futex,
                              timed ? std::optional(pal::internal::futex_deadline::at(to_timespec(due)))
                                    : std::nullopt);
  }
  // seq_cst: as the announcement; a rare path (once per park).
  sleep_word.store(running, std::memory_order_seq_cst);
}

void worker_state::cancel_list(work_node* list) noexcept {
  while (list) {
    work_node& n = *list;
    list = n.next;  // before the node may be handed back or completed
    n.prev = n.next = nullptr;
    if (!n.try_claim(n.generation)) {
      skip(n);  // cancel() got there first: not cancelled at the stop, and not counted
      continue;
    }
    cancelled_at_stop.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    if (invoke_context* call = n.invoke) {
      try {
        call->error = std::make_exception_ptr(sync_error(
            std::errc::operation_canceled, "sync_manager::invoke: the sync manager stopped before the work ran"));
      } catch (...) {
        call->error = std::current_exception();  // bad_alloc: still an error, never a silent success
      }
      call->complete();
      continue;
    }
    n.posted.reset();
    pool.give(n);
  }
}

void worker_state::cancel_all(worker_local& local) noexcept {
  // What this worker took from the inbox was queued before the stop (the inbox was open when
  // it took it): it never runs now, even if a new worker serves the manager already.
  cancel_list(local.queue.take_all());
  // The ring's items, all claimed before the stop closed it; then the ring is free for the
  // next worker (post_ring.hpp). relaxed: a statistic.
  if (local.ring) cancelled_at_stop.fetch_add(local.ring->cancel_all_closed(), std::memory_order_relaxed);
  // What is still in the inbox, only while it is closed: restarted after this worker missed
  // its stop deadline, the inbox belongs to the new worker now.
  for (std::size_t p = work_priority_count; p-- > 0;) cancel_list(inbox.take_if_closed(p));
}

}  // namespace palrt::sync::internal

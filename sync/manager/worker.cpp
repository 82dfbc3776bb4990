// SPDX-License-Identifier: MIT
// The sync manager's worker loop: runs queued work in priority order, fires timers, and
// watches processes (internal/worker_state.hpp states the sleep protocol).
#include <time.h>

#include <cerrno>
#include <limits>
#include <optional>

#include "palrt/core/clock.h"
#include "palrt/pal/internal/futex.hpp"
#include "palrt/sync/handle.hpp"
#include "palrt/sync/internal/worker_state.hpp"

namespace palrt::sync::internal {
namespace {

// What the worker thread keeps for itself while its loop runs: which state it serves, and
// the nodes of items it ran, handed back to the pool in batches (one pool lock per batch
// instead of one per item; the lock is the one posters take). On the loop's stack, so a
// detached worker and its successor never share it.
struct worker_local {
  const worker_state* state = nullptr;
  work_node* spent = nullptr;
  work_node* spent_tail = nullptr;
  int spent_count = 0;
};
thread_local worker_local* current_local = nullptr;

// Processes are checked at least this often while the queue never empties, so a busy worker
// still notices exits (one non-blocking epoll_wait per this many items).
constexpr int items_between_process_checks = 64;

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

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
  const std::uint32_t was = sleep_word.exchange(awake, std::memory_order_seq_cst);
  if (was == sleeping_on_futex) {
    pal::internal::futex_wake(sleep_word, 1);
  } else if (was == sleeping_in_epoll) {
    processes.poke();
  }
}

void worker_state::run(const std::atomic<bool>& stop) {
  worker_local local;
  local.state = this;
  worker_local* const outer = current_local;
  current_local = &local;
  int since_process_check = 0;
  // acquire: what the stopper wrote before request_stop() is visible once we see it.
  while (!stop.load(std::memory_order_acquire)) {
    if (run_one() || spin_for_work()) {
      // Items found by the spin count too: a stream that never lets the worker sleep must
      // not keep it from noticing exits.
      if (++since_process_check >= items_between_process_checks && processes.active()) {
        since_process_check = 0;
        processes.wait_and_handle(timespec{0, 0});
      }
      continue;
    }
    since_process_check = 0;  // sleep() looks at the processes (in epoll) when any are watched
    return_spent();           // before sleeping: posters may need them
    sleep();
  }
  return_spent();
  current_local = outer;
  cancel_all();
}

void worker_state::pump_until(invoke_context& context) {
  // Our own item is queued until it runs, so there is always something ready until then.
  // acquire: pairs with complete()'s release (the item may have run in a deeper pump).
  while (context.word.load(std::memory_order_acquire) != invoke_context::done) {
    if (!run_one()) sleep();  // only timers are due later: not our item; wait for them
  }
}

bool worker_state::spin_for_work() {
  // A poster that keeps the worker busy usually queues its next item within a microsecond
  // of the worker running dry; sleeping then costs a futex wait here and a futex wake there
  // (tens of microseconds on a virtual machine). So watch for a new item for a few
  // microseconds before sleeping: spin_rounds x 16 pauses, measured at ~8.6 us on the
  // project's AMD EPYC VMs (a pause is ~17 ns there), a third of one wake-up. The spin
  // reads `pushes` only, not the queue: taking the queue lock in a loop would slow the very
  // posters it waits for.
  // relaxed: a change is only a hint; run_one() takes the lock and sees the item.
  const std::uint64_t seen = pushes.load(std::memory_order_relaxed);
  for (int i = 0; i < spin_rounds; ++i) {
    for (int p = 0; p < 16; ++p) cpu_relax();
    if (pushes.load(std::memory_order_relaxed) != seen) return run_one();
  }
  return false;
}

bool worker_state::run_one() {
  work_node* n;
  {
    std::lock_guard lock(queue_mutex);
    // The clock only matters with timers queued (a vDSO read is ~20 ns, per item).
    n = queue.pop_ready(queue.has_timers() ? palrt_monotonic_ns() : 0);
  }
  if (!n) return false;
  run_item(*n);
  return true;
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
  n.posted.reset();  // its captures go now, outside every lock
  worker_local& local = *current_local;  // run_item runs on the worker only
  n.pool_free_next = local.spent;
  if (!local.spent) local.spent_tail = &n;
  local.spent = &n;
  if (++local.spent_count >= spent_batch) return_spent();
}

void worker_state::sleep() noexcept {
  const bool epoll = processes.active();
  sleep_word.store(epoll ? sleeping_in_epoll : sleeping_on_futex, std::memory_order_seq_cst);
  std::int64_t due;
  {
    std::lock_guard lock(queue_mutex);
    // A process watched since `epoll` was read: its open_process() may have found us awake
    // and not woken us, so look again rather than sleep on the futex (process_monitor.hpp).
    if (queue.has_ready() || closed || epoll != processes.active()) {
      // relaxed: we do not sleep after all; a poster that still reads the old value only
      // makes a needless wake().
      sleep_word.store(awake, std::memory_order_relaxed);
      return;
    }
    due = queue.next_due_ns();
  }
  const bool timed = due != std::numeric_limits<std::int64_t>::max();
  if (timed && due <= palrt_monotonic_ns()) {
    sleep_word.store(awake, std::memory_order_relaxed);  // relaxed: as above
    return;
  }
  if (epoll) {
    std::optional<timespec> timeout;
    if (timed) timeout = to_timespec(std::max<std::int64_t>(0, due - palrt_monotonic_ns()));
    processes.wait_and_handle(timeout);
  } else {
    // Returns at once if a poster already set the word back to awake. EINTR, ETIMEDOUT and
    // spurious wake-ups all lead back to the loop, which looks again.
    pal::internal::futex_wait(sleep_word, sleeping_on_futex,
                              timed ? std::optional(pal::internal::futex_deadline::at(to_timespec(due)))
                                    : std::nullopt);
  }
  sleep_word.store(awake, std::memory_order_seq_cst);
}

void worker_state::cancel_all() noexcept {
  work_node* left;
  {
    std::lock_guard lock(queue_mutex);
    // Restarted after this worker missed its stop deadline: the queue belongs to the new
    // worker now; leave it alone.
    if (!closed) return;
    left = queue.take_all();
  }
  while (left) {
    work_node& n = *left;
    left = n.next;
    n.next = nullptr;
    cancelled_at_stop.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    if (invoke_context* call = n.invoke) {
      try {
        call->error = std::make_exception_ptr(
            sync_error(std::errc::operation_canceled, "sync_manager::invoke: the sync manager stopped before the work ran"));
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

}  // namespace palrt::sync::internal

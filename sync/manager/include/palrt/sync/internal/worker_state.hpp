// SPDX-License-Identifier: MIT
// What the sync manager's worker thread and the threads that give it work share: the queue,
// the node pool, the process monitor, and the word the worker sleeps on. Co-owned by the
// worker's loop, so a worker detached after a missed stop deadline still has valid memory.
//
// Sleep protocol (Dekker-shaped, with the queue lock as one side's fence):
//   worker: sleep_word = futex or epoll (seq_cst); lock; nothing ready? unlock; sleep while
//           the word still says so (futex) or until the eventfd fires (epoll).
//   poster: lock; push; unlock; if sleep_word (seq_cst) != awake: wake().
// If the worker's check under the lock came first, the poster's lock acquire orders the
// worker's store before the poster's load, so the poster sees it asleep and wakes it; if the
// push came first, the worker's check finds the item. wake() exchanges the word back to
// awake, so of many posters only one pays the syscall.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/sync/internal/adaptive_mutex.hpp"
#include "palrt/sync/internal/invoke_context.hpp"
#include "palrt/sync/internal/node_pool.hpp"
#include "palrt/sync/internal/process_monitor.hpp"
#include "palrt/sync/internal/work_queue.hpp"

namespace palrt::sync::internal {

class worker_state {
 public:
  // Guards queue, closed and next_id. Never held while user code runs or a node is freed.
  adaptive_mutex queue_mutex;
  work_queue queue;
  bool closed = false;  // stopped: no new work until the worker is started again
  std::uint64_t next_id = 1;
  // Items made ready so far. Written under queue_mutex (so a plain load-and-store is enough:
  // one writer at a time), read without it by the worker's spin before sleeping, which only
  // needs to notice that it changed: relaxed, and the item is then popped under the lock.
  std::atomic<std::uint64_t> pushes{0};
  void count_push() noexcept { pushes.store(pushes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  node_pool pool;
  process_monitor processes;

  // relaxed: statistics.
  std::atomic<std::uint64_t> failed_items{0};  // posted items whose work threw
  std::atomic<std::uint64_t> cancelled_at_stop{0};

  // Run items' nodes the worker keeps before handing them back to the pool at once.
  static constexpr int spent_batch = 32;

  // In a fork()ed child the manager is its parent's (sync_manager.hpp, "After fork()").
  const pal::internal::fork_stamp made;

  // Any thread, after queueing work outside the lock: wakes the worker if it sleeps.
  void wake_if_sleeping() noexcept {
    if (sleep_word.load(std::memory_order_seq_cst) != awake) wake();
  }
  void wake() noexcept;

  // The worker's loop (service_thread's work function): runs items until `stop`, then, if
  // the manager was stopped (closed), cancels what is left.
  void run(const std::atomic<bool>& stop);
  // On the worker, inside a work item: runs items until `context` is done (a nested invoke).
  void pump_until(invoke_context& context);
  // Whether the calling thread is this state's worker, inside run().
  bool on_worker() const noexcept;

 private:
  static constexpr std::uint32_t awake = 0, sleeping_on_futex = 1, sleeping_in_epoll = 2;
  std::atomic<std::uint32_t> sleep_word{awake};

  static constexpr int spin_rounds = 32;

  // Pops and runs one ready item; false if none was ready.
  bool run_one();
  // Before sleeping: watches `pushes` for a few microseconds and runs what arrives; true if
  // it ran an item.
  bool spin_for_work();
  void run_item(work_node& n) noexcept;
  // Hands the nodes the worker has run back to the pool.
  void return_spent() noexcept;
  void sleep() noexcept;
  void cancel_all() noexcept;
};

}  // namespace palrt::sync::internal

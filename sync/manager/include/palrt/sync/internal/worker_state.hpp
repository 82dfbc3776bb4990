// SPDX-License-Identifier: MIT
// What the sync manager's worker thread and the threads that give it work share: the inbox,
// the node pool, the process monitor, and the word the worker parks on. Co-owned by the
// worker's loop, so a worker detached after a missed stop deadline still has valid memory.
// The worker's own queue (priority FIFOs, timers) is not here: it lives on the worker's loop
// (worker.cpp), since only the worker touches it.
//
// Nobody takes a lock to hand over work. A poster pushes onto the inbox (work_inbox.hpp) and
// then issues a futex wake only if the worker has announced that it parks: while the worker
// runs items or spins (adaptive_spin.hpp) it finds new items itself, so a stream of posts
// costs no system call on either side (wake-ups are batched: one per park, not one per item).
// Spinning is "running" as far as posters are concerned; the word is written only on the
// way into and out of a park, so a poster's read of it stays a cache hit while the worker is
// busy.
//
// Park protocol, fence pair W (Dekker: each side writes its own location, then reads the
// other's, all four accesses seq_cst, so at least one side sees the other's write):
//   poster:  W1  push the node (inbox compare-exchange, seq_cst)
//            W1' read sleep_word (seq_cst); parked? wake(): exchange it to `running` and
//                futex_wake (or poke the epoll), so of many posters only one pays the call.
//   worker:  W2  sleep_word = parked (seq_cst)
//            W2' re-read the inbox heads and its closed bit (seq_cst); anything? sleep_word =
//                running and go back to work; else futex_wait(sleep_word, parked).
// In the single total order of seq_cst operations, either W2 precedes W1', and the poster
// sees `parked` and wakes the worker (if the wake comes before the futex_wait, the word is no
// longer `parked` and the wait returns at once: the kernel compares it under its own lock),
// or W1' precedes W2; then W1 (sequenced before W1') precedes W2' too, and the worker's
// re-read finds the node. A poster acting between the worker's W2 and W2' is the first case;
// a worker parking between the poster's W1 and W1' is the second. No wake-up is lost.
// A stop is a poster too: it closes the inbox (W1, on every head) and then reads the word.
// The small-item ring (post_ring.hpp) is one more place W1 may write and W2' reads: a ring
// poster's W1 is its entry's seq_cst publish, and the worker's W2' reads the entry at its
// ring's head (post_ring::ready(), seq_cst).
#pragma once

#include <atomic>
#include <cstdint>

#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/sync/internal/invoke_context.hpp"
#include "palrt/sync/internal/node_pool.hpp"
#include "palrt/sync/internal/post_ring.hpp"
#include "palrt/sync/internal/process_monitor.hpp"
#include "palrt/sync/internal/work_inbox.hpp"
#include "palrt/sync/internal/work_queue.hpp"

namespace palrt::sync::internal {

struct worker_local;

class worker_state {
 public:
  work_inbox inbox;
  post_ring ring;
  node_pool pool;
  process_monitor processes;
  // Set by the start that reopened the ring (post_ring::reopen_if_free) for the worker it
  // launches, which takes it at the start of its loop. seq_cst for simplicity: once a start.
  std::atomic<bool> ring_for_next_worker{false};

  // Tests: called by the worker after its last look for work and before it parks (futex or
  // epoll), to hold it there while another thread posts. relaxed: set while the worker cannot
  // be parking (a test sets it, then makes the worker park, which publishes it).
  std::atomic<void (*)(void*)> before_park_for_test{nullptr};
  void* before_park_arg_for_test = nullptr;

  // relaxed: statistics.
  std::atomic<std::uint64_t> failed_items{0};  // posted items whose work threw
  std::atomic<std::uint64_t> cancelled_at_stop{0};
  // Times the worker has entered a park (futex or epoll wait), counted just before the system
  // call; for tests that wait for the worker to park (sync_manager_access::parks). relaxed: a
  // count, read by polling; what the test then checks is the thread's state in /proc.
  std::atomic<std::uint64_t> parks{0};

  // Run items' nodes the worker keeps before handing them back to the pool at once.
  static constexpr int spent_batch = 32;

  // In a fork()ed child the manager is its parent's (sync_manager.hpp, "After fork()").
  const pal::internal::fork_stamp made;

  // Any thread, after pushing work or closing the inbox: wakes the worker if it parks.
  // seq_cst: W1' of fence pair W.
  void wake_if_sleeping() noexcept {
    if (sleep_word.load(std::memory_order_seq_cst) != running) wake();
  }
  void wake() noexcept;

  // The worker's loop (service_thread's work function): runs items until `stop`, then
  // cancels what it holds, and what the inbox holds if the manager was stopped (closed).
  void run(const std::atomic<bool>& stop);
  // On the worker, inside a work item: runs items until `context` is done (a nested invoke).
  void pump_until(invoke_context& context);
  // Whether the calling thread is this state's worker, inside run().
  bool on_worker() const noexcept;

 private:
  static constexpr std::uint32_t running = 0, parked_on_futex = 1, parked_in_epoll = 2;
  std::atomic<std::uint32_t> sleep_word{running};

  // Pops and runs one ready item, skipping cancelled ones; false if none was ready.
  bool run_one();
  // Before parking: spins (adaptively, at most sync_manager::max_spin) for a new item and runs
  // it; true if it ran one.
  bool spin_for_work();
  void run_item(work_node& n) noexcept;
  void run_small(std::uint64_t kind, std::uint64_t bits) noexcept;
  // Whether the inbox or the worker's ring has something (seq_cst loads: W2').
  bool work_visible() const noexcept;
  // After try_claim() failed on `n`: forgets it, handing it back to the pool if the canceller
  // is done with it (work_node.hpp).
  void skip(work_node& n) noexcept;
  // The earliest live timer's due time (INT64_MAX with none), dropping cancelled ones.
  std::int64_t next_due_ns(worker_local& local) noexcept;
  // Hands the nodes the worker has run back to the pool.
  void return_spent() noexcept;
  void sleep() noexcept;
  void cancel_all(worker_local& local) noexcept;
  void cancel_list(work_node* list) noexcept;
};

}  // namespace palrt::sync::internal

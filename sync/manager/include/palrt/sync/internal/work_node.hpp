// SPDX-License-Identifier: MIT
// One item of the sync manager's work queue, and the claim word that makes cancel() exact.
// Posted items' nodes come from the node pool and go back to it after they ran or were
// cancelled; an invoke's node is part of its caller's leased invoke_context.
//
// Claim protocol. Two threads may race for a queued node: the worker, to run it (or to cancel
// it at a stop), and a cancel() caller. Neither holds a lock, so the node carries one atomic
// word, `claim` = generation << 3 | state, and whoever moves it out of `queued` by
// compare-exchange owns the item:
//   worker:    queued -> running                        (try_claim_for_run; it runs the item)
//   canceller: queued -> cancelling, destroys the task, then exchange -> cancel_done
//   worker, finding the node no longer queued:          exchange -> skipped
// A cancelled node is still linked in the queue (a lock-free queue cannot unlink from the
// middle), so the worker meets it later. Of the canceller's second step and the worker's
// skip, whichever comes second sees the other's state in its exchange's result and hands the
// node back to the pool: never both, never while the canceller still destroys the task.
// The generation is bumped each time the pool hands the node out and is part of every
// compare-exchange, so a ticket for an earlier use of a reused node cancels nothing.
#pragma once

#include <atomic>
#include <cstdint>

#include "palrt/sync/task.hpp"
#include "palrt/sync/work_priority.hpp"

namespace palrt::sync::internal {

struct invoke_context;

// One cache line or two per node, never shared: a poster writes the next node while the
// worker reads the one before it (64 bytes: the line size of x86-64 and of common arm64 cores).
struct alignas(64) work_node {
  enum state : std::uint64_t { queued = 0, running = 1, cancelling = 2, cancel_done = 3, skipped = 4 };
  static constexpr unsigned state_bits = 3;

  // Queue links: the inbox's push stack (written by the poster before it publishes the node),
  // then the worker's own FIFO or timer list (worker only). work_queue.hpp, work_inbox.hpp.
  work_node* prev = nullptr;
  work_node* next = nullptr;

  std::atomic<std::uint64_t> claim{0};  // generation << state_bits | state
  std::uint64_t generation = 0;         // written by the node's taker before it is queued

  work_priority priority = work_priority::normal;
  bool timed = false;       // post_after: goes to the timer list, due at due_ns
  std::int64_t due_ns = 0;  // CLOCK_MONOTONIC
  // An untimed normal-priority node: the small-item ring's tail when it was posted; the worker
  // runs it once the ring's head has reached it (post_ring.hpp, "Order with the node path").
  // 0 for the others. Written by the poster before publishing the node.
  std::uint64_t ring_stamp = 0;

  task posted;                       // a posted item's work
  invoke_context* invoke = nullptr;  // an invoked item's caller

  // The pool's links (node_pool.hpp): this node's index, and the next free one's.
  std::uint32_t pool_index = 0;
  std::atomic<std::uint32_t> pool_free_next{0};

  static constexpr std::uint64_t word(std::uint64_t gen, state s) noexcept { return gen << state_bits | s; }

  // The poster, before publishing the node: a new generation, queued. relaxed: the inbox's
  // release push publishes it with the rest of the node.
  void mark_queued() noexcept { claim.store(word(generation, queued), std::memory_order_relaxed); }

  // The worker: true if it now owns the item (to run it, or to cancel it at a stop). false if
  // a canceller got there first; the worker then calls skip() and forgets the node.
  // acquire on success: the poster's writes to the node (published by the inbox) are
  // visible already; acquire on failure: the canceller's task reset happens-before a pool
  // give by skip(). Either way no stronger ordering is needed: the word is only ever moved by
  // these read-modify-writes, so one of the two racing compare-exchanges fails.
  bool try_claim(std::uint64_t gen) noexcept {
    std::uint64_t expected = word(gen, queued);
    return claim.compare_exchange_strong(expected, word(gen, running), std::memory_order_acquire,
                                         std::memory_order_acquire);
  }
  // The worker, after try_claim failed: true if the node is the worker's to hand back now (the
  // canceller has finished with it). acq_rel: acquire the canceller's reset, release our last
  // reads of the links before the canceller may hand the node back.
  bool skip(std::uint64_t gen) noexcept {
    return claim.exchange(word(gen, skipped), std::memory_order_acq_rel) == word(gen, cancel_done);
  }
  // cancel(): true if the item was queued under generation `gen` and is now the canceller's
  // (never runs). relaxed on failure: nothing of the node is read after a failed attempt.
  bool try_cancel(std::uint64_t gen) noexcept {
    std::uint64_t expected = word(gen, queued);
    return claim.compare_exchange_strong(expected, word(gen, cancelling), std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  // cancel(), after destroying the task: true if the worker skipped the node already, so the
  // canceller hands it back. acq_rel: as skip(), from the other side.
  bool finish_cancel(std::uint64_t gen) noexcept {
    return claim.exchange(word(gen, cancel_done), std::memory_order_acq_rel) == word(gen, skipped);
  }
};

}  // namespace palrt::sync::internal

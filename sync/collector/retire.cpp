// SPDX-License-Identifier: MIT
// gc::retire (retire.hpp): deferred reclamation over the read sections' grace periods.
//
// Protocol, over reader_epoch.cpp's two steps (a scan, then a walk under the list's lock):
//   retire(p): append (p, reclaim) to the thread's filling batch. The caller unlinked p
//     before the call.
//   queue: t = retire_epoch() (B'': after every unlinking of the batch's items, since they
//     all came before the calls that appended them), then, under `lock`, push the batch
//     tagged t.
//   reclaim: oldest = oldest_reader_epoch() (the scan: E, the barrier B', the records); then,
//     under `lock`, detach every batch tagged t < oldest; then, with no lock, run them.
// A batch the walk detaches was tagged before the scan's E, and no reader that could reach
// one of its items was still in a section after the barrier (reader_epoch.cpp's argument,
// unchanged: the walk may meet batches queued after the scan, and their tags are >= oldest).
//
// The lock guards the list only, never the reclaims, so a reclaim may retire again. It is a
// leaf held across fork() (fork_generation.hpp), so a child never inherits it held.
#include "palrt/gc/retire.hpp"

#include <sched.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::gc {

namespace {

struct retired_batch {
  struct item {
    void* p;
    reclaim_fn reclaim;
  };
  std::uint64_t tag = 0;  // retire_epoch() when queued
  std::size_t count = 0;
  retired_batch* next = nullptr;
  item items[retire_batch_capacity];
};

// The process-wide queue. Never destroyed (a thread may queue its batch at exit after static
// destructors ran, and what is never due stays allocated until exit, as retire.hpp says).
struct retire_queue {
  std::mutex lock;
  retired_batch* head = nullptr;  // guarded by lock; unsorted (threads queue out of tag order)
  std::size_t in_flight = 0;      // batches detached and not yet run to their end; guarded by lock

  retire_queue() { pal::internal::hold_across_fork(lock, pal::internal::fork_lock_rank::leaf); }
};

retire_queue& queue() {
  static retire_queue* const q = new retire_queue;  // never freed: see retire_queue
  return *q;
}

constinit thread_local retired_batch* filling = nullptr;
// This thread's exit hook ran: a retire() later in its exit queues its batch at once.
constinit thread_local bool filling_exited = false;
// Batches this thread has detached and is running (a reclaim that calls drain_retired()).
constinit thread_local std::size_t running_here = 0;

void queue_filling() noexcept {
  retired_batch* b = filling;
  if (!b) return;
  filling = nullptr;
  if (!b->count) {
    delete b;
    return;
  }
  b->tag = internal::retire_epoch();  // B'': after every item's unlinking
  retire_queue& q = queue();
  std::lock_guard guard(q.lock);
  b->next = q.head;
  q.head = b;
}

// Gives the thread's partial batch to the queue when the thread exits.
struct filling_release {
  ~filling_release() {
    filling_exited = true;
    queue_filling();
  }
};

// Detaches every batch whose grace period has passed, runs them, and frees them: how many
// reclaims ran.
std::size_t run_due() {
  retire_queue& q = queue();
  const std::uint64_t oldest = internal::oldest_reader_epoch();  // the scan (E, B')
  retired_batch* due = nullptr;
  std::size_t batches = 0;
  {
    std::lock_guard guard(q.lock);
    for (retired_batch** link = &q.head; retired_batch* b = *link;) {
      if (b->tag < oldest) {
        *link = b->next;
        b->next = due;
        due = b;
        ++batches;
      } else {
        link = &b->next;
      }
    }
    q.in_flight += batches;
  }
  if (!batches) return 0;
  running_here += batches;
  std::size_t n = 0;
  while (retired_batch* b = due) {
    due = b->next;
    for (std::size_t i = 0; i < b->count; ++i) b->items[i].reclaim(b->items[i].p);
    n += b->count;
    delete b;
  }
  running_here -= batches;
  std::lock_guard guard(q.lock);
  q.in_flight -= batches;
  return n;
}

}  // namespace

void retire(void* p, reclaim_fn reclaim) {
  retired_batch* b = filling;
  if (!b) {
    b = new retired_batch;  // std::bad_alloc: nothing retired
    if (!filling_exited) {
      static thread_local filling_release release_at_exit;  // registers the exit hook first
      (void)release_at_exit;
    }
    filling = b;
  }
  b->items[b->count++] = {p, reclaim};
  if (b->count == retire_batch_capacity || filling_exited) {
    queue_filling();
    run_due();
  }
}

std::size_t reclaim_retired() {
  queue_filling();
  return run_due();
}

bool drain_retired(std::chrono::nanoseconds timeout) {
  if (detail::current_reader && detail::current_reader->state.load(std::memory_order_relaxed) != 0)
    throw std::logic_error("palrt::gc::drain_retired: called inside a read section of this thread");
  queue_filling();
  // Every batch queued so far was tagged below this (a tag of its own, wasted: epochs are
  // plentiful); a batch queued later may be tagged below it too, and is waited for as well.
  const std::uint64_t horizon = internal::retire_epoch();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  retire_queue& q = queue();
  for (int attempt = 0;; ++attempt) {
    run_due();
    {
      std::lock_guard guard(q.lock);
      // Batches another thread detached may be ours, and still running: wait for those too
      // (but not for the ones this thread runs, when a reclaim drains).
      bool left = q.in_flight > running_here;
      for (retired_batch* b = q.head; b && !left; b = b->next) left = b->tag < horizon;
      if (!left) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // A reader is inside a section (a few ns normally; longer if it was preempted): give it
    // the CPU, then back off, as collector::synchronize() does.
    if (attempt < 10)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * attempt)));
  }
}

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// gc::retire (retire.hpp): deferred reclamation over the read sections' grace periods.
//
// Protocol, over reader_epoch.cpp's two steps (a scan, then a walk under the list's lock):
//   retire(p): append (p, reclaim) to the thread's filling batch. The caller unlinked p
//     before the call.
//   queue: t = retire_epoch() (B'': after every unlinking of the batch's items, since they
//     all came before the calls that appended them), then, under `lock`, push the batch
//     tagged t.
//   reclaim: oldest = oldest_reader_epoch() (the scan: E, the barrier B', the records), or
//     known_safe_epoch() (F': the verdict of a scan any thread made); then, under `lock`,
//     detach every batch tagged t < oldest; then, with no lock, run them.
// A batch the walk detaches was tagged before the scan's E, and no reader that could reach
// one of its items was still in a section after the barrier (reader_epoch.cpp's argument,
// unchanged: the walk may meet batches queued after the scan, and their tags are >= oldest;
// and for known_safe_epoch(), reader_epoch.cpp's "Sharing a scan's verdict").
//
// The lock guards the list only, never the reclaims, so a reclaim may retire again. It is a
// leaf held across fork() (fork_generation.hpp), so a child never inherits it held.
#include "palrt/gc/retire.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>

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

// A run of reclaims in progress: the batches one run_due() detached, not yet run to their end.
struct run_record {
  // The smallest tag among the batches not yet run to their end (they run in tag order).
  // Written by the runner with no lock; release: a drain that reads a tag past its horizon
  // (acquire) sees every reclaim of the batches below it done.
  std::atomic<std::uint64_t> oldest_tag{0};
  const void* owner = nullptr;  // the running thread (see owner_id())
  run_record* next = nullptr;   // guarded by the queue's lock
};

// Sorts a list of batches by tag, smallest first (a merge sort: no allocation).
retired_batch* sorted_by_tag(retired_batch* list) noexcept {
  if (!list || !list->next) return list;
  retired_batch* slow = list;
  for (retired_batch* fast = list->next; fast && fast->next; fast = fast->next->next) slow = slow->next;
  retired_batch* second = slow->next;
  slow->next = nullptr;
  retired_batch* a = sorted_by_tag(list);
  retired_batch* b = sorted_by_tag(second);
  retired_batch* head = nullptr;
  retired_batch** tail = &head;
  while (a && b) {
    retired_batch*& smaller = a->tag <= b->tag ? a : b;
    *tail = smaller;
    tail = &smaller->next;
    smaller = smaller->next;
  }
  *tail = a ? a : b;
  return head;
}

// The process-wide queue. Never destroyed (a thread may queue its batch at exit after static
// destructors ran, and what is never due stays allocated until exit, as retire.hpp says).
struct retire_queue {
  std::mutex lock;
  retired_batch* head = nullptr;  // guarded by lock; unsorted (threads queue out of tag order)
  std::size_t queued = 0;         // batches on the list; guarded by lock
  run_record* runs = nullptr;     // runs in progress; guarded by lock

  retire_queue();
};

retire_queue& queue() {
  static retire_queue* const q = new retire_queue;  // never freed: see retire_queue
  return *q;
}

constinit thread_local retired_batch* filling = nullptr;
// This thread's exit hook ran: a retire() later in its exit queues its batch at once.
constinit thread_local bool filling_exited = false;

// A value of this thread's own, to tell its runs from other threads' (a reclaim that drains).
const void* owner_id() noexcept { return &filling; }

// Queues the thread's batch: how many batches are queued now.
std::size_t queue_filling() noexcept {
  retired_batch* b = filling;
  if (!b) return 0;
  filling = nullptr;
  if (!b->count) {
    delete b;
    return 0;
  }
  b->tag = internal::retire_epoch();  // B'': after every item's unlinking
  retire_queue& q = queue();
  std::lock_guard guard(q.lock);
  b->next = q.head;
  q.head = b;
  return ++q.queued;
}

// Gives the thread's partial batch to the queue when the thread exits.
struct filling_release {
  ~filling_release() {
    filling_exited = true;
    queue_filling();
  }
};

// fork(): in the child, the runs of the parent's other threads will never end (their batches
// are never run there: retire.hpp). Forgotten, so that a drain in the child does not wait for
// them; the forking thread's own run (a reclaim that forked) goes on in the child. On the
// child's only thread, before it can start another: no lock needed (fork() held it).
void forget_other_threads_runs() noexcept {
  retire_queue& q = queue();
  for (run_record** link = &q.runs; *link;)
    if ((*link)->owner != owner_id())
      *link = (*link)->next;
    else
      link = &(*link)->next;
}

retire_queue::retire_queue() {
  pal::internal::hold_across_fork(lock, pal::internal::fork_lock_rank::leaf);
  if (int err = ::pthread_atfork(nullptr, nullptr, [] { forget_other_threads_runs(); })) {
    std::fprintf(stderr, "palrt: gc::retire: pthread_atfork: %s\n", std::strerror(err));
    std::abort();  // a fork()ed child's drains could wait for runs that never end instead
  }
}

// Runs, and frees, every queued batch below `oldest` (a scan's verdict): how many reclaims ran.
std::size_t run_below(std::uint64_t oldest) {
  retire_queue& q = queue();
  retired_batch* due = nullptr;
  run_record run;
  run.owner = owner_id();
  {
    std::lock_guard guard(q.lock);
    for (retired_batch** link = &q.head; retired_batch* b = *link;) {
      if (b->tag < oldest) {
        *link = b->next;
        b->next = due;
        due = b;
        --q.queued;
      } else {
        link = &b->next;
      }
    }
    if (!due) return 0;
    due = sorted_by_tag(due);
    run.oldest_tag.store(due->tag, std::memory_order_relaxed);  // published by the lock
    run.next = q.runs;
    q.runs = &run;
  }
  std::size_t n = 0;
  while (retired_batch* b = due) {
    due = b->next;
    for (std::size_t i = 0; i < b->count; ++i) b->items[i].reclaim(b->items[i].p);
    n += b->count;
    delete b;
    run.oldest_tag.store(due ? due->tag : ~std::uint64_t{0}, std::memory_order_release);
  }
  std::lock_guard guard(q.lock);
  run_record** link = &q.runs;
  while (*link != &run) link = &(*link)->next;
  *link = run.next;
  return n;
}

// Tests' hook (grace_period.hpp's retire_access); relaxed: set by a test before the calls.
std::atomic<void (*)(void*)> drain_hook{nullptr};
std::atomic<void*> drain_hook_context{nullptr};

// The scan (E, B', the records), then the batches it lets run.
std::size_t scan_and_run() { return run_below(internal::oldest_reader_epoch()); }

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
    if (queue_filling() >= retire_scan_batches)  // a barrier per this many batches (retire.hpp)
      scan_and_run();
    else
      run_below(internal::known_safe_epoch());  // F': another thread's scan, no barrier
  }
}

std::size_t reclaim_retired() {
  queue_filling();
  return scan_and_run();
}

bool drain_retired(std::chrono::nanoseconds timeout) {
  if (detail::current_reader && detail::current_reader->state.load(std::memory_order_relaxed) != 0)
    throw std::logic_error("palrt::gc::drain_retired: called inside a read section of this thread");
  queue_filling();
  // Every batch queued so far was tagged below this (a tag of its own, wasted: epochs are
  // plentiful). Batches tagged later, queued or running, are not waited for.
  const std::uint64_t horizon = internal::retire_epoch();
  if (auto hook = drain_hook.load(std::memory_order_relaxed)) [[unlikely]]
    hook(drain_hook_context.load(std::memory_order_relaxed));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  retire_queue& q = queue();
  for (int attempt = 0;; ++attempt) {
    scan_and_run();
    {
      std::lock_guard guard(q.lock);
      bool left = false;
      for (retired_batch* b = q.head; b && !left; b = b->next) left = b->tag < horizon;
      // Another thread may be running batches of ours (not this thread: a reclaim that drains
      // would wait for itself).
      for (run_record* r = q.runs; r && !left; r = r->next)
        left = r->owner != owner_id() && r->oldest_tag.load(std::memory_order_acquire) < horizon;
      if (!left) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    internal::reader_wait_backoff(attempt);  // a reader is inside a section
  }
}

}  // namespace palrt::gc

namespace palrt::gc::internal {
void retire_access::on_drain_horizon(void (*hook)(void*), void* context) noexcept {
  drain_hook_context.store(context, std::memory_order_relaxed);
  drain_hook.store(hook, std::memory_order_relaxed);
}
}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// Read sections and grace periods: palrt's epoch-based reclamation over the process barrier.
//
// Reader (read_section): e = global_epoch (acquire); record.state = e and a count of one (B,
// plain store); ... loads ...; record.state = 0 (release) when the thread's last open section
// closes. Sections opened and closed while another is open only change the count (the epoch
// stays; read_section.hpp). Below, "a record's epoch" is that word's epoch, 0 outside.
// Retiring a batch: unlink it (clear the handles, or replace the pointer, that lead to it);
// t = global_epoch++ (B'', the batch's tag).
// Reclaiming, in two steps that other threads may act between:
//   1. The scan (oldest_reader_epoch): now = global_epoch (E, acquire); then
//      FlushProcessWriteBuffers() (B'); then read every record. It returns
//      min(now, every record's epoch other than 0).
//   2. The walk, later (after the caller takes the lock of its retired list, which may have
//      grown since the scan): a batch tagged t is freed if t < what the scan returned.
//
// Why that is enough, for a reader R and a batch tagged t that the walk frees:
//   - t < now: the batch's B'' comes before E in global_epoch's order. Every write to
//     global_epoch is a read-modify-write (B''), so the value E read is in the release
//     sequence of that B'', and E synchronises with it: the unlinking happens before E, so
//     before B' and the scan. A batch retired after E has t >= now and never passes this
//     scan, whether or not any reader was in a section: "no reader" means "everything
//     retired before the scan", not "everything". (Without E, a reclaimer that scanned with
//     no reader inside and then walked its list freed what another thread retired after the
//     scan, under a reader that had opened its section meanwhile.)
//   - R's record reads e > t: R read the epoch after B'' (acquire pairs with its acq_rel
//     increment), so R also sees the unlinking, done before B'': R cannot reach the batch.
//   - R's record reads 0 after B': either R was outside a section when the barrier ran on
//     its CPU, so any section it opens later loads after the unlinking (which happened
//     before E, so before B') was globally visible; or R's section had ended (its release
//     store of 0 orders its reads before our free).
//     What the barrier rules out is the store buffer case: R stored its epoch (B) but the
//     store was not yet visible while R's loads already ran. After B' returns, every other
//     thread has executed a full barrier, so B is visible to our scan or R's loads come after.
//   - R's record reads e <= t: R may hold a pointer into the batch; it waits.
//
// Sharing a scan's verdict (known_safe_epoch): each scan publishes what it returned into
// safe_below, a maximum (F: a compare-exchange, release); a reclaimer that reads v there (F',
// acquire) may free a batch tagged t < v without a scan of its own, at any time after. The
// argument above holds for it unchanged: the scan S that returned v (or a larger value) read
// every record after its barrier, and F' synchronises with S's F (or with a later F, whose
// compare-exchange continues the release sequence), so what S read happens before the free.
// The verdict does not expire: a reader that opens a section after S loads after the
// unlinking (which came before S's E, so before its B'), whatever time passes; and a reader
// that was inside with e <= t made S return e <= t, not v.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "palrt/pal/compat.hpp"
#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::gc::detail {
// Starts at 1: a record holding 0 is outside any section.
std::atomic<std::uint64_t> global_epoch{1};
constinit thread_local reader_record* current_reader = nullptr;
}  // namespace palrt::gc::detail

namespace palrt::gc::internal {

using detail::current_reader;
using detail::global_epoch;
using detail::reader_record;

namespace {

// Records are pushed at the head and never removed or freed.
std::atomic<reader_record*> all_readers{nullptr};

// This thread's exit hook (below) has run: a section opened later in the thread's exit (by
// another thread_local's destructor) gets a record that is never given back, rather than a
// hook that no longer exists.
constinit thread_local bool reader_exited = false;

// The largest value a scan returned (F, F' above).
std::atomic<std::uint64_t> safe_below{1};

// Threads that exited inside a section (relaxed: a counter for the report).
std::atomic<std::uint64_t> sections_left_open{0};

// The thread exits inside a section it never closed: it left it without unwinding (a
// longjmp out of one, a section object never destroyed, an exit through a frame that does
// not run destructors). Left as it is, the record's epoch would hold every grace period from
// now on, and the next thread to claim the record would find it open, so its own sections
// would only count themselves and never publish an epoch of their own. The thread is gone, so
// nothing it loaded is used any more: the record is closed here, and the first time it is
// reported.
void close_abandoned_sections(reader_record& r) noexcept {
  if (sections_left_open.fetch_add(1, std::memory_order_relaxed) == 0)
    std::fprintf(stderr, "palrt: a thread exited inside a read section it never closed (left without unwinding); its "
                         "reader record is reset (further ones are only counted)\n");
  // release: as a section's end (read_section.hpp); pairs with the scan's acquire.
  r.state.store(0, std::memory_order_release);
}

// Gives the thread's record back when the thread exits (reused by a later thread).
struct reader_release {
  ~reader_release() {
    reader_exited = true;
    if (reader_record* r = current_reader) {
      current_reader = nullptr;
      // relaxed: the thread's own store, read back.
      if (r->state.load(std::memory_order_relaxed) != 0) [[unlikely]]
        close_abandoned_sections(*r);
      // release: our last section's end is visible to the thread that claims it next.
      r->in_use.store(false, std::memory_order_release);
    }
  }
};

// fork(): the child has one thread, the one that forked. The records of the parent's other
// threads still say what those threads were doing, and one that was inside a section would
// hold every grace period of the child back for good (nobody will ever close it). In the
// child they are handed back (outside any section, free for the child's threads to claim);
// the forking thread keeps its own. relaxed: this runs on the child's only thread, before it
// can start another (thread creation publishes these stores to the new thread), and no
// reclaimer runs meanwhile.
void release_other_threads_records() noexcept {
  for (reader_record* r = all_readers.load(std::memory_order_relaxed); r; r = r->next) {
    if (r == current_reader) continue;
    r->state.store(0, std::memory_order_relaxed);
    r->in_use.store(false, std::memory_order_relaxed);
  }
}

// Before the first record exists.
void release_records_in_fork_child() {
  static const bool installed = [] {
    if (int err = ::pthread_atfork(nullptr, nullptr, &release_other_threads_records)) {
      std::fprintf(stderr, "palrt: read sections: pthread_atfork: %s\n", std::strerror(err));
      std::abort();  // a fork()ed child's grace periods could wait forever instead
    }
    return true;
  }();
  (void)installed;
}

}  // namespace
}  // namespace palrt::gc::internal

namespace palrt::gc::detail {

void throw_too_many_sections() {
  throw std::length_error("palrt::gc::read_section: 65535 sections of this thread are open already");
}

// A thread's first read section: a free record of an exited thread, or a new one.
reader_record* register_current_reader() {
  using internal::all_readers;
  using internal::reader_exited;
  using internal::reader_release;
  using internal::release_records_in_fork_child;
  release_records_in_fork_child();
  if (!reader_exited) {
    static thread_local reader_release release_at_exit;  // registers the exit hook first
    (void)release_at_exit;
  }
  for (reader_record* r = all_readers.load(std::memory_order_acquire); r; r = r->next) {
    bool expected = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      current_reader = r;
      return r;
    }
  }
  auto* r = new reader_record;  // never freed: reclaimers walk the list without a lock
  r->in_use.store(true, std::memory_order_relaxed);
  reader_record* head = all_readers.load(std::memory_order_relaxed);
  do {
    r->next = head;
    // release: a reclaimer walking the list sees the record initialised.
  } while (!all_readers.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_relaxed));
  current_reader = r;
  return r;
}
}  // namespace palrt::gc::detail

namespace palrt::gc::internal {

std::uint64_t retire_epoch() noexcept {
  // B'': acq_rel, so a reader that reads the new value (acquire), and a reclaimer's scan
  // whose E reads it or a later one, sees our unlinking.
  const std::uint64_t t = global_epoch.fetch_add(1, std::memory_order_acq_rel);
  // A record keeps the epoch in its top 48 bits: 2^48 retirements (centuries at the rate of
  // a batch per microsecond) before a reader's epoch would wrap and pass for an old one.
  if (t >= (std::uint64_t{1} << (64 - detail::section_depth_bits)) - 1) [[unlikely]] {
    std::fprintf(stderr, "palrt: read sections: the global epoch is exhausted (2^48 retirements)\n");
    std::abort();
  }
  return t;
}

std::uint64_t oldest_reader_epoch() {
  // E: acquire, so every batch tagged below `now` was unlinked before this load (it pairs
  // with the B'' of each retire_epoch() whose increment it reads, or follows); before B'.
  const std::uint64_t now = global_epoch.load(std::memory_order_acquire);
  FlushProcessWriteBuffers();  // B'
  // Not UINT64_MAX when no reader is inside: a batch retired after E must never pass.
  std::uint64_t oldest = now;
  for (reader_record* r = all_readers.load(std::memory_order_acquire); r; r = r->next) {
    // acquire: pairs with the reader's release store of 0 (its reads are done).
    const std::uint64_t e = r->state.load(std::memory_order_acquire) >> detail::section_depth_bits;
    if (e != 0) oldest = std::min(oldest, e);
  }
  std::uint64_t known = safe_below.load(std::memory_order_relaxed);
  // F, release: publishes this scan's verdict with what the scan read (see the top of the
  // file); relaxed on failure: the loop only compares.
  while (known < oldest &&
         !safe_below.compare_exchange_weak(known, oldest, std::memory_order_release, std::memory_order_relaxed)) {
  }
  return oldest;
}

namespace {
std::atomic<void (*)(void*)> reader_wait_hook{nullptr};
std::atomic<void*> reader_wait_context{nullptr};
}  // namespace

void reader_wait_access::on_wait(void (*hook)(void* context), void* context) noexcept {
  reader_wait_context.store(context, std::memory_order_relaxed);
  reader_wait_hook.store(hook, std::memory_order_release);
}

void wait_for_readers(const char* who) {
  if (current_reader && current_reader->state.load(std::memory_order_relaxed) != 0)
    throw std::logic_error(std::string(who) + ": called inside a read section of this thread");
  // The caller's stores are before the epoch's increment (acq_rel), and the scan's barrier is
  // after it: a reader the scan does not see inside was outside when the barrier ran, so
  // its next section's loads see those stores (the argument of retire and free, above).
  const std::uint64_t tag = retire_epoch();
  for (int attempt = 0; oldest_reader_epoch() <= tag; ++attempt) {
    if (auto hook = reader_wait_hook.load(std::memory_order_acquire)) [[unlikely]]
      hook(reader_wait_context.load(std::memory_order_relaxed));
    reader_wait_backoff(attempt);
  }
}

std::uint64_t known_safe_epoch() noexcept {
  return safe_below.load(std::memory_order_acquire);  // F': pairs with the scans' F
}

reader_census count_readers() noexcept {
  reader_census c;
  c.left_open_at_exit = sections_left_open.load(std::memory_order_relaxed);
  for (reader_record* r = all_readers.load(std::memory_order_acquire); r; r = r->next) {
    ++c.records;
    if (r->in_use.load(std::memory_order_relaxed)) ++c.in_use;
  }
  return c;
}

}  // namespace palrt::gc::internal

// SPDX-License-Identifier: MIT
// palrt::gc::read_section: a reader's critical section of palrt's memory reclamation.
//
// Memory that lock-free readers may still be reading (an object whose weak handles were
// just cleared, a cache's retired storage) is freed only after a grace period: once every
// read section that was open when it was unlinked has closed. A reader opens a section
// around its loads and its use of what it loaded:
//
// Example:
//   { palrt::gc::read_section section;
//     if (void* p = handle_table::target(h)) {  // may be cleared and retired right now...
//       /* ... use p ... */                     // ...but is not freed before the section ends
//     }
//   }
//
// The reader's side is two plain stores to a cache line of its own thread (an epoch in,
// zero out) and no fence: the reclaimer pays instead, with one process-wide barrier
// (FlushProcessWriteBuffers, membarrier on Linux) per grace period. This is the asymmetric
// fence of liburcu's memb flavour and folly's asymmetric_thread_fence: a section costs a few
// nanoseconds, a grace period a few microseconds. (palrt-bench barrier, docs/BENCHMARKS.md.)
//
// Sections nest (only the outermost one counts). A section must be short and never block:
// while it is open, nothing retired after it opened can be freed. It belongs to its thread
// (do not move it to another). The first section of a thread registers the thread (an
// allocation, std::bad_alloc if that fails); its record is reused when the thread exits.
// A thread that exits inside a section it left without unwinding (a longjmp out of it, a
// section object never destroyed) has its record closed at exit, with one line on stderr
// the first time: it neither holds up grace periods nor leaves the next thread a record
// that looks open.
//
// Not async-signal-safe: do not open a section in a signal handler. A thread's first section
// allocates (and registers a thread_local destructor), which a handler must not do.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstdint>

namespace palrt::gc {

namespace detail {

// One per thread that ever read; never freed (reused after its thread exits), so a
// reclaimer can walk the list of records without a lock.
struct alignas(64) reader_record {
  // 0 outside a section; otherwise the global epoch the outermost section began in (never 0:
  // global_epoch starts at 1). Only its thread writes it; a nonzero value tells a section
  // that an enclosing one of its thread is open (sections are objects: they close in reverse).
  std::atomic<std::uint64_t> epoch{0};
  std::atomic<bool> in_use{false};
  reader_record* next = nullptr;  // immutable once published
};

extern std::atomic<std::uint64_t> global_epoch;
extern constinit thread_local reader_record* current_reader;
reader_record* register_current_reader();

}  // namespace detail

class read_section {
 public:
  read_section() {
    detail::reader_record* r = detail::current_reader;
    if (!r) [[unlikely]] r = detail::register_current_reader();
    // relaxed: the thread's own store, read back; nonzero: an enclosing section published it,
    // and this one is nested (record_ stays null and the destructor does nothing).
    if (r->epoch.load(std::memory_order_relaxed) == 0) {
      // acquire: a reader that sees an epoch the reclaimer advanced to also sees what the
      // reclaimer unlinked before advancing it (B'' in reader_epoch.cpp).
      const std::uint64_t e = detail::global_epoch.load(std::memory_order_acquire);
      // B: a plain store, no fence. The reclaimer's process-wide barrier (B') makes either
      // this store visible to its scan, or the reclaimer's unlinking visible to our loads.
      r->epoch.store(e, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // keep our loads after the store
      record_ = r;
    }
  }
  ~read_section() {
    if (record_)
      // release: our reads of what we loaded happen before a reclaimer that sees 0 frees it.
      record_->epoch.store(0, std::memory_order_release);
  }
  read_section(const read_section&) = delete;
  read_section& operator=(const read_section&) = delete;

 private:
  detail::reader_record* record_ = nullptr;  // the outermost section's; null in a nested one
};

}  // namespace palrt::gc

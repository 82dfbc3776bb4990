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
// The reader's side is a load and a plain store on a cache line of its own thread at each
// end (the epoch and a count in, zero out) and no fence: the reclaimer pays instead, with one
// process-wide barrier (FlushProcessWriteBuffers, membarrier on Linux) per grace period. This is the asymmetric
// fence of liburcu's memb flavour and folly's asymmetric_thread_fence: a section costs a few
// nanoseconds, a grace period a few microseconds. (palrt-bench barrier, docs/BENCHMARKS.md.)
//
// Sections nest, and a thread's sections may close in any order: a C++20 coroutine that
// suspends inside one, or a std::optional<read_section> reset early, may close an outer
// section while an inner one is open. What counts is whether any section of the thread is
// open: the epoch the first one published stays published until the last one closes (at most
// 65535 open at once on one thread; one more throws std::length_error). A section must be
// short and never block:
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
  // 0 outside any section. Inside: (epoch << section_depth_bits) | depth, where epoch is the
  // global epoch the thread's first open section read (never 0: global_epoch starts at 1) and
  // depth counts the thread's open sections, 1 to section_depth_max. Only its thread writes
  // it. One word, so that a reclaimer reads the epoch in one load, and a section's open and
  // close are one load and one store each, whatever order its sections close in.
  std::atomic<std::uint64_t> state{0};
  std::atomic<bool> in_use{false};
  reader_record* next = nullptr;  // immutable once published
};
inline constexpr unsigned section_depth_bits = 16;
inline constexpr std::uint64_t section_depth_max = (std::uint64_t{1} << section_depth_bits) - 1;

extern std::atomic<std::uint64_t> global_epoch;
extern constinit thread_local reader_record* current_reader;
reader_record* register_current_reader();
[[noreturn]] void throw_too_many_sections();

}  // namespace detail

class read_section {
 public:
  read_section() : record_(detail::current_reader) {
    if (!record_) [[unlikely]]
      record_ = detail::register_current_reader();
    // relaxed: the thread's own word, read back.
    const std::uint64_t s = record_->state.load(std::memory_order_relaxed);
    if (s == 0) {
      // acquire: a reader that sees an epoch the reclaimer advanced to also sees what the
      // reclaimer unlinked before advancing it (B'' in reader_epoch.cpp).
      const std::uint64_t e = detail::global_epoch.load(std::memory_order_acquire);
      // B: a plain store, no fence. The reclaimer's process-wide barrier (B') makes either
      // this store visible to its scan, or the reclaimer's unlinking visible to our loads.
      record_->state.store((e << detail::section_depth_bits) | 1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // keep our loads after the store
    } else {
      // Another section of this thread is open and its epoch is published: this one only
      // counts itself (relaxed: the epoch, all a reclaimer reads, does not change).
      if ((s & detail::section_depth_max) == detail::section_depth_max) [[unlikely]]
        detail::throw_too_many_sections();
      record_->state.store(s + 1, std::memory_order_relaxed);
    }
  }
  ~read_section() {
    // The thread's last open section (whichever was opened first) withdraws the epoch;
    // another one only uncounts itself. release: our reads of what we loaded happen before a
    // reclaimer that sees 0 frees it (for a count that stays above 0, free on every target).
    const std::uint64_t s = record_->state.load(std::memory_order_relaxed);
    record_->state.store((s & detail::section_depth_max) == 1 ? 0 : s - 1, std::memory_order_release);
  }
  read_section(const read_section&) = delete;
  read_section& operator=(const read_section&) = delete;

 private:
  detail::reader_record* record_;  // this thread's (a section belongs to its thread)
};

}  // namespace palrt::gc

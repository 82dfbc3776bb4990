// SPDX-License-Identifier: MIT
// owned_mutex: a mutex whose lock word is the id of the thread that holds it, so that a
// signal handler can tell, async-signal-safely, that it interrupted its own thread inside the
// critical section (held_by(its tid)). The process barrier's locks are these: a flush from
// a handler that interrupted a flush on its thread must not wait for a lock its own thread
// holds (it would wait forever), and the strategies serve it without the lock instead
// (barrier_mprotect.cpp, barrier_signal.cpp say why that is sound).
//
// Why not std::mutex and an owner field beside it: the owner is then written after the lock
// is taken, and a handler that runs between the two finds the lock held by "nobody it knows"
// and waits for itself. Here taking the lock and naming its owner are one compare-exchange.
//
// Normal, not recursive: lock() by the holder is a bug, and aborts with a message instead of
// hanging. unlock() does not check the caller, so fork()'s child handler may release a lock
// the forking thread took under its id in the parent (fork_generation.hpp). Every operation
// is async-signal-safe (atomics and futex calls only). BasicLockable and Lockable, for
// std::lock_guard and std::unique_lock; lock(tid) and try_lock(tid) save a gettid() where
// the caller has its id already.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "palrt/pal/internal/futex.hpp"
#include "palrt/pal/internal/signal_safe_message.hpp"

namespace palrt::pal::internal {

class owned_mutex {
 public:
  constexpr owned_mutex() noexcept = default;
  owned_mutex(const owned_mutex&) = delete;
  owned_mutex& operator=(const owned_mutex&) = delete;

  static pid_t current_tid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

  bool try_lock(pid_t self) noexcept {
    std::uint32_t expected = 0;
    // acquire: the critical section follows the previous holder's release (unlock()).
    return word_.compare_exchange_strong(expected, static_cast<std::uint32_t>(self), std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  bool try_lock() noexcept { return try_lock(current_tid()); }

  void lock(pid_t self) noexcept {
    std::uint32_t seen = 0;
    const auto me = static_cast<std::uint32_t>(self);
    // acquire: as in try_lock.
    if (word_.compare_exchange_strong(seen, me, std::memory_order_acquire, std::memory_order_relaxed)) return;
    for (;;) {
      if (seen == 0) {
        // Free, but others may sleep on it: take it marked contended, so that our unlock
        // wakes the next one (the mark is not ours to clear). acquire: as in try_lock.
        if (word_.compare_exchange_weak(seen, me | contended, std::memory_order_acquire, std::memory_order_relaxed))
          return;
        continue;
      }
      if ((seen & ~contended) == me) reentered();
      // relaxed: the mark only asks the holder's unlock for a wake; nothing else is published.
      if (!(seen & contended) &&
          !word_.compare_exchange_weak(seen, seen | contended, std::memory_order_relaxed, std::memory_order_relaxed))
        continue;
      futex_wait(word_, seen | contended);  // 0, EAGAIN or EINTR: look again
      seen = word_.load(std::memory_order_relaxed);
    }
  }
  void lock() noexcept { lock(current_tid()); }

  void unlock() noexcept {
    // release: the critical section happens before the next holder's acquire.
    if (word_.exchange(0, std::memory_order_release) & contended) futex_wake(word_, 1);
  }

  // Whether thread `tid` holds it: exact for the calling thread (only it takes or releases
  // it under its own id), a snapshot for any other.
  bool held_by(pid_t tid) const noexcept {
    // relaxed: for the caller's own id the value was written by this thread (or is not its id),
    // so no other thread's write can make the answer wrong.
    return (word_.load(std::memory_order_relaxed) & ~contended) == static_cast<std::uint32_t>(tid);
  }

 private:
  // Thread ids are below 2^22 (PID_MAX_LIMIT on 64-bit Linux), so the top bit is free.
  static constexpr std::uint32_t contended = 1u << 31;

  [[noreturn]] static void reentered() noexcept {
    (signal_safe_message() << "palrt: a process-barrier lock was taken again by the thread that holds it (a "
                              "fork() from a signal handler that interrupted a flush?)")
        .write_line();
    std::abort();
  }

  std::atomic<std::uint32_t> word_{0};  // 0, or the holder's tid | contended
};

}  // namespace palrt::pal::internal

// SPDX-License-Identifier: MIT
// palrt's fork() machinery behind the contract of palrt/pal/fork.hpp: the generation objects
// are stamped with, the process-wide locks fork() holds, and the parent's state a child keeps
// without touching it. One set of pthread_atfork() handlers (fork.cpp), installed by the
// first stamp or lock registered.
//
//   prepare (parent, the forking thread): take the registry's lock, then every registered
//            lock in rank order (waiting for their holders);
//   parent:  release them;
//   child:   release them (the child's one thread is the one that took them), then bump the
//            generation: every stamp made before now reads as forked().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "palrt/pal/internal/keep_until_exit.hpp"  // a child keeps its parent's state with it

namespace palrt::pal::internal {

class owned_mutex;

// How many fork()s lie between the process palrt's handlers were installed in and this one.
// Written only by the child handler, on the child's only thread before it can start another
// (thread creation orders the write before anything a new thread does); in the parent it
// never changes. So a relaxed load reads the current value on any thread.
extern std::atomic<std::uint64_t> fork_generation_counter;

// Installs the handlers (once; later calls return at once). Aborts with a message if
// pthread_atfork() fails (ENOMEM): an object that could not tell a child from its parent
// would hang there instead.
void install_fork_handlers();

// The generation an object was made in.
class fork_stamp {
 public:
  fork_stamp() noexcept;
  // true in a child forked after the stamp was made: the object is its parent's.
  bool forked() const noexcept {
    // relaxed: see fork_generation_counter.
    return generation_ != fork_generation_counter.load(std::memory_order_relaxed);
  }
  std::uint64_t generation() const noexcept { return generation_; }
  // The current generation, for objects that keep a plain number (public headers).
  static std::uint64_t now() noexcept { return fork_stamp().generation_; }

 private:
  std::uint64_t generation_;
};

// The order fork() takes registered locks in: a lock taken while another is held ranks after
// it. Locks of one rank never nest.
enum class fork_lock_rank : std::uint8_t {
  barrier_setup,  // the process barrier's initialisation (it creates strategies)
  barrier_flush,  // a strategy's flush (the mprotect toggle, the signal round)
  side_table,     // the identity caches' record side table: leaf locks (a handle table's
                  // registry) may be taken under it
  leaf,           // held briefly, with no other palrt lock taken under it
};

// fork() takes `m` (see the top), so that a child never inherits it held. For palrt's
// process-wide locks only: `m` must live until the process ends, be held only briefly and
// never while calling host code, and be registered once, with no registered lock held.
void hold_across_fork(std::mutex& m, fork_lock_rank rank);
// The same for an owned_mutex (the process barrier's locks, owned_mutex.hpp).
void hold_across_fork(owned_mutex& m, fork_lock_rank rank);

// What tests reach in the fork machinery.
class fork_access {
 public:
  // `hook(context)` runs in fork()'s prepare handler, on the forking thread, each time a lock
  // it is about to take is held by another thread, before it waits for it: a test that holds
  // the lock releases it then, instead of guessing when fork() has started. Null: none.
  static void on_contended_prepare(void (*hook)(void* context), void* context) noexcept;
};

}  // namespace palrt::pal::internal

// SPDX-License-Identifier: MIT
// Mutexes as Win32 has them: owned by a thread, recursive, and abandoned when their owner
// exits.
//
// A wait on a mutex acquires it: the waiting thread becomes its owner, or, if it owns it
// already, acquires it once more (each acquisition needs its own release()). Only the owner
// may release it. When a thread exits while it owns mutexes, each is abandoned: it becomes
// free, and the next wait that acquires it reports wait_status::abandoned rather than
// signalled, so that the new owner knows the state the mutex protects may be half-updated.
//
// This is a waitable object for the waits in wait.hpp (with timeouts, with other objects,
// alertably). As a plain lock it is slower than std::mutex: use std::mutex for that.
//
// Thread-safe.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

enum class mutex_owner { nobody, calling_thread };

class mutex_handle : public handle {
 public:
  mutex_handle() noexcept = default;  // closed
  // A new mutex, free or owned once by the calling thread. Throws std::bad_alloc only.
  explicit mutex_handle(mutex_owner initial_owner);

  // Releases one acquisition by the calling thread. Throws sync_error(EPERM) if the calling
  // thread does not own the mutex (nothing changes), EBADF on a closed handle.
  void release();
};

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
// The lock of the work queue and the node pool: glibc's adaptive mutex, which spins briefly
// (up to ~100 tries) before sleeping in the kernel.
//
// Why not std::mutex: its critical sections here are tens of nanoseconds (link a node,
// unlink a node), and the poster and the worker take it at high rates. A contended std::mutex
// sleeps at once, and on a virtual machine waking the sleeper costs tens of microseconds;
// palrt-bench invoke's `post` case ran at ~0.5x the condvar baseline with std::mutex, most of
// the time in futex sleeps and wake-ups on the lock. Spinning a little while the holder, on
// another CPU, finishes its few instructions avoids them. BasicLockable, for std::lock_guard.
#pragma once

#include <pthread.h>

namespace palrt::sync::internal {

class adaptive_mutex {
 public:
  adaptive_mutex() noexcept {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mutex_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~adaptive_mutex() { pthread_mutex_destroy(&mutex_); }
  adaptive_mutex(const adaptive_mutex&) = delete;
  adaptive_mutex& operator=(const adaptive_mutex&) = delete;

  // An adaptive mutex cannot fail to lock except by deadlock, which it does not detect.
  void lock() noexcept { pthread_mutex_lock(&mutex_); }
  void unlock() noexcept { pthread_mutex_unlock(&mutex_); }

 private:
  pthread_mutex_t mutex_;
};

}  // namespace palrt::sync::internal

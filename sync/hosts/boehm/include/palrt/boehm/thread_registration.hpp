// SPDX-License-Identifier: MIT
// palrt::boehm::scoped_thread_registration: registers the calling thread with Boehm for the
// scope's lifetime (GC_register_my_thread with the thread's own stack base, then
// GC_unregister_my_thread), for a host's threads that Boehm did not start (std::thread, a
// thread pool). A thread already registered (the main thread, one made by GC_pthread_create)
// is left as it is. palrt's own threads need none: the collector_binding registers them.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

namespace palrt::boehm {

class scoped_thread_registration {
 public:
  // Throws std::runtime_error if Boehm cannot register the thread (GC_allow_register_threads
  // not called: a collector_binding calls it).
  scoped_thread_registration();
  ~scoped_thread_registration();
  scoped_thread_registration(const scoped_thread_registration&) = delete;
  scoped_thread_registration& operator=(const scoped_thread_registration&) = delete;

 private:
  bool registered_ = false;  // by this object (not before)
};

}  // namespace palrt::boehm

// SPDX-License-Identifier: MIT
// hold_gate: holds the next call of the binding that concerns one native pointer, until the
// suite lets it go: the suite's way to act inside a window that is otherwise microseconds
// wide, without sleeping and hoping. Two gates, each on one path of the binding:
//   sweep_gate()   at the start of sweep() (WrapperSweeper.java), for the token
//                  sweep_gate_token() rather than a native: the window between the collector
//                  clearing a wrapper's weak reference and the sweep removing its entry (a
//                  dying wrapper; HostProbe.holdSweep)
//   make_gate()    at the start of publish(), the native of at()'s miss (WrapperCache.java),
//                  with the wrapper and its cleanup made in Java but not cached: the window in
//                  which another thread can cache its own wrapper for the native first (a
//                  creation race; HostProbe.holdMake)
// A gate holds one call, the first to arrive for its pointer after hold(), and disarms as it
// does. A call it does not hold costs one relaxed load and a compare: outside the suite, a
// gate is never armed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace palrt_jvmhost {

class hold_gate {
 public:
  // Arms the gate for `native`; forgets an earlier arm that no call reached.
  void hold(const void* native) noexcept;
  // Waits up to `timeout` for the held call to be waiting in pass(): true once it is.
  bool await_held(std::chrono::milliseconds timeout) noexcept;
  // Lets the held call go on, or, if none arrived, disarms the gate.
  void release() noexcept;
  // On the binding's path: waits there if the gate is armed for `native`.
  void pass(const void* native) noexcept {
    // relaxed: the suite arms the gate before it makes the call (or the collection that
    // makes the sweeper call) that must be held, which reaches the calling thread through
    // synchronisation of its own (a thread start; the reference queue's lock, which the
    // sweeper's canary passes through after the collection), so the store is visible here. A call for another pointer
    // may miss an arm that races with it, which concerns it not; the lock decides which call is held.
    if (armed_.load(std::memory_order_relaxed) == native && native) [[unlikely]]
      wait_for_release(native);
  }

 private:
  void wait_for_release(const void* native) noexcept;

  std::atomic<const void*> armed_{nullptr};  // written under lock_
  std::mutex lock_;
  std::condition_variable changed_;
  bool held_ = false;      // guarded by lock_: a call waits in pass()
  bool released_ = false;  // guarded by lock_
};

// Destroyed at exit: no call can be held then, since only the suite arms them and every case
// releases what it held before it ends.
hold_gate& sweep_gate() noexcept;
const void* sweep_gate_token() noexcept;  // what sweep() passes: HostProbe.holdSweep() arms it
hold_gate& make_gate() noexcept;

}  // namespace palrt_jvmhost

// The three process-barrier strategies behind flush_process_write_buffers(), one file each
// (barrier_<name>.cpp). Each factory sets its strategy up or throws barrier_error with the
// errno that stopped it; nothing in them depends on other palrt state being initialised.
#pragma once

#include <memory>
#include <mutex>

#include "palrt/pal/process_barrier.hpp"

namespace palrt::pal::internal {

// One strategy instance.
class barrier_instance {
 public:
  virtual ~barrier_instance() = default;
  virtual barrier_strategy strategy() const noexcept = 0;
  virtual void flush() noexcept = 0;
};

// `registered`: the caller has just registered this process successfully. Otherwise this
// checks the kernel offers the commands and registers (the slow path if threads exist).
std::unique_ptr<barrier_instance> make_membarrier_barrier(bool registered);

// `automatic`: refuse where the trick is not known to be reliable (not x86-64, or the CPU
// flushes TLBs by broadcast without IPIs), so only an explicit force uses it there.
std::unique_ptr<barrier_instance> make_mprotect_barrier(bool automatic);
// The lock every mprotect instance's flush takes, for the fork handlers (process_barrier.cpp).
std::mutex& mprotect_toggle_lock() noexcept;

std::unique_ptr<barrier_instance> make_signal_barrier();
// The lock that serialises the signal strategy's rounds (may allocate its state), for the
// fork handlers.
std::mutex& signal_round_lock();

[[noreturn]] void barrier_failed(const char* strategy, int error) noexcept;

// What palrt's diagnostics (palrt-startup doctor, palrt-bench barrier) and tests reach beyond
// the public API: a strategy instance of their own, independent of the process's choice, to
// compare strategies in one run.
class process_barrier_access {
 public:
  // Throws barrier_error when the strategy cannot work here. The membarrier instance
  // registers if needed.
  static std::unique_ptr<barrier_instance> make_instance(barrier_strategy s);
  // measure_flush_cost_ns() for this instance.
  static double measure_flush_cost_ns(barrier_instance& barrier, int flushes_per_round = 1000);
  // The lock an mprotect instance's flush takes, held by the caller (fork tests hold it while
  // another thread forks). Throws std::invalid_argument for an instance of another strategy.
  static std::unique_lock<std::mutex> hold_flush_lock(barrier_instance& barrier);
};

}  // namespace palrt::pal::internal

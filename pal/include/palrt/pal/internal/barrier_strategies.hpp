// SPDX-License-Identifier: MIT
// The three process-barrier strategies behind flush_process_write_buffers(), one file each
// (barrier_<name>.cpp). Each factory sets its strategy up or throws barrier_error with the
// errno that stopped it; nothing in them depends on other palrt state being initialised.
#pragma once

#include <memory>
#include <mutex>

#include "palrt/pal/internal/owned_mutex.hpp"
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

// Why the mprotect trick is no barrier on this machine (not x86-64, or a CPU that invalidates
// TLBs by broadcast without IPIs), or nullptr where it is one. The check a test installed with
// process_barrier_access::set_mprotect_check(), if any, answers instead.
const char* mprotect_barrier_unsuitable() noexcept;

// Throws barrier_error ENOTSUP where mprotect_barrier_unsuitable() says why, whoever asks for
// it: automatic selection, PALRT_BARRIER=mprotect and process_barrier_access alike, since a
// barrier that does not reach every thread makes every grace period built on it unsound.
std::unique_ptr<barrier_instance> make_mprotect_barrier();
// The lock every mprotect instance's flush takes, for the fork handlers (process_barrier.cpp).
owned_mutex& mprotect_toggle_lock() noexcept;

std::unique_ptr<barrier_instance> make_signal_barrier();
// The lock that serialises the signal strategy's rounds (may allocate its state), for the
// fork handlers.
owned_mutex& signal_round_lock();

// Prints "palrt: <strategy> process barrier failed: <errno's description>" and aborts.
// Async-signal-safe, as a flush is.
[[noreturn]] void barrier_failed(const char* strategy, int error) noexcept;

// Each strategy's flush calls this at the point where a flush from a signal handler that
// interrupts it finds the most half done (process_barrier_access::hook_next_flush).
void run_flush_hook() noexcept;

// A test's hook: a function and its context.
struct barrier_hook {
  void (*call)(void* context);
  void* context;
};

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
  static std::unique_lock<owned_mutex> hold_flush_lock(barrier_instance& barrier);

  // One-shot hooks, run on the thread concerned, cleared just before they run (so a flush the
  // hook itself causes, from a signal handler it raises, runs it only if it is set again);
  // `hook` must outlive that run. Async-signal-safe, to be set again from a handler.
  // The next flush of any strategy and instance runs `hook` where a flush from a signal
  // handler that interrupts it finds the most half done: membarrier, before its system call;
  // mprotect, with its lock held and the helper page writable, its write still to come;
  // signal, with its lock held and a round published, its signals not yet sent.
  static void hook_next_flush(const barrier_hook* hook) noexcept;
  // The next initialisation of the process barrier runs `hook` with its lock held, before it
  // chooses a strategy.
  static void hook_next_initialisation(const barrier_hook* hook) noexcept;

  // The machine check behind the mprotect strategy: why the trick is no barrier here, or
  // nullptr. A check returns a static string.
  using mprotect_check = const char* (*)() noexcept;
  // Replaces that check for this process (nullptr restores the real one), so that a test on
  // a machine where the trick works takes the path of one where it does not. Call it before
  // the barrier is initialised or an instance is made; it changes no strategy already set up.
  static void set_mprotect_check(mprotect_check check) noexcept;
  // What the check answers now (the replacement, if one is set): tests choose their
  // expectations from it.
  static const char* mprotect_unsuitable() noexcept { return mprotect_barrier_unsuitable(); }
};

}  // namespace palrt::pal::internal

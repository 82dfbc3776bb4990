// SPDX-License-Identifier: MIT
// FlushProcessWriteBuffers(): a process-wide memory barrier.
//
// After flush_process_write_buffers() returns, every other thread of the process has
// executed a full memory barrier at some point between the call's start and its return.
// This lets a hot path pay only a compiler barrier while a rare slow path pays for both
// sides (asymmetric fences: RCU-style grace periods, GC suspension, handle-table sweeps).
//
// Strategies, chosen once at initialisation, first that works. Costs per flush measured on
// 2-vCPU virtual machines (palrt-bench barrier, docs/BENCHMARKS.md): alone / with a busy
// thread of the process on the other CPU, whom the barrier must interrupt (on a VM an IPI
// is a hypervisor exit, hence the jump).
//   membarrier  MEMBARRIER_CMD_PRIVATE_EXPEDITED after registration. ~0.6 us / ~13 us.
//   mprotect    toggle the protection of a locked helper page under a mutex: the TLB
//               shootdown IPIs every CPU running this mm (CoreCLR's and folly's fallback).
//               x86-64 only: arm64 invalidates TLBs by broadcast without an IPI. ~4 / ~17 us.
//   signal      signal every thread listed in /proc/self/task; each handler fences and
//               acknowledges (musl's fallback; any architecture). ~2.5 / ~36 us, but a
//               scheduler time slice (~4 ms) once threads outnumber CPUs: a preempted
//               thread answers only when it runs again. Threads must not block the palrt
//               signal (see below).
// PALRT_BARRIER=membarrier|mprotect|signal forces one (read once, not under AT_SECURE). A
// forced strategy that cannot work here is an error, never a silent fallback: initialisation
// throws barrier_error with its errno, ENOTSUP for mprotect where the trick is no barrier
// (not x86-64, or a CPU with INVLPGB), exactly where automatic selection skips it.
//
// What the signal strategy means for the host's threads:
// - Every flush runs a handler in every other thread. It is installed with SA_RESTART, so a
//   thread blocked in a call the kernel restarts (read and write on pipes, sockets and
//   terminals; wait and waitpid; accept, connect, recv and send on sockets without a
//   timeout; flock and F_SETLKW; futex waits without a timeout, sem_wait, pthread mutexes
//   and condition variables, std::mutex and std::condition_variable, timed waits included)
//   goes back to it unaware. signal(7) lists the calls that are never restarted, whatever
//   SA_RESTART says: a flush that finds a thread blocked in one makes it fail with EINTR,
//   so a thread using them must retry on EINTR:
//     poll, ppoll, select, pselect, epoll_wait, epoll_pwait;
//     nanosleep, clock_nanosleep, usleep, and sleep, which returns the seconds left
//     (std::this_thread::sleep_for retries by itself);
//     futex waits with a timeout (FUTEX_WAIT, FUTEX_WAIT_BITSET), sem_timedwait;
//     sigtimedwait, sigwaitinfo, sigsuspend, pause;
//     io_getevents; System V msgrcv, msgsnd, semop, semtimedop;
//     socket calls on a socket with SO_RCVTIMEO or SO_SNDTIMEO set (accept, recv,
//     recvfrom, recvmsg, recvmmsg; connect, send, sendto, sendmsg);
//     read on an inotify descriptor before Linux 3.8.
// - fork(): a child's flushes reach the child's own threads.
// - PID namespaces: threads are found in /proc, which must be the process's own PID
//   namespace's. Where it is not (`unshare --pid --fork` without --mount-proc, a container
//   sharing the host's /proc), initialisation refuses the strategy (barrier_error, ESRCH),
//   and a child fork()ed into such a namespace after initialisation aborts at its first
//   flush with a message rather than return without a barrier.
// - The signal is a real-time one, so each is queued: while the user's queue is full
//   (RLIMIT_SIGPENDING), a flush waits for room for the threads it could not signal.
// - The signal must stay palrt's. Initialisation refuses the strategy (barrier_error, EBUSY)
//   where the signal has a handler already: the host's, or that of another copy of palrt in
//   the process using this strategy (two copies keep two process-wide states and cannot
//   share one signal; the message names both objects: link every module against
//   libpalrt.so, see palrt/pal/process_copies.hpp). A host that later installs SIG_IGN or
//   SIG_DFL for it, or a handler of its own that does not call palrt's, leaves no running
//   thread able to answer a flush: each flush checks the signal's disposition (one sigaction
//   call, again whenever its wait drags on) and aborts with a message naming what holds the
//   signal now (SIG_IGN, SIG_DFL, another handler and its object, another copy of palrt)
//   rather than wait for good: at once for SIG_IGN and SIG_DFL, and for another handler
//   once a flush has waited a second for a running thread, since a handler that chains to
//   palrt's (calls the handler it replaced) keeps the strategy working.
//
// From a signal handler: once the barrier is initialised (initialize_process_barrier() or a
// flush has returned), flush_process_write_buffers() is async-signal-safe in every strategy.
// It takes no lock its own thread may hold, allocates nothing with malloc (the signal
// strategy's buffers grow with mmap) and writes its failure messages with write(2). That
// holds in a handler that interrupted a flush on its own thread, wherever that flush was:
//   membarrier  one system call, as always.
//   mprotect    the interrupted flush holds the strategy's lock; the handler's flush toggles
//               the page without it, nested in the interrupted toggle, and leaves the page as
//               that one needs it. Any depth.
//   signal      the interrupted flush holds the round lock; the handler's flush runs rounds
//               of its own beside the interrupted one (its own thread listing and
//               acknowledgements), and each handler acknowledges both. Up to 7 flushes nested
//               in handlers on one thread; an 8th aborts with a message.
// Each is a whole barrier, as promised below. Before initialisation a flush initialises,
// which is not async-signal-safe (it allocates, reads /proc, may register): initialise before
// installing a handler that flushes. A handler that interrupts its own thread's
// initialisation and flushes aborts with a message instead of waiting for itself. A flush may
// change errno, as any system call does, and the signal strategy's needs a few KiB of stack
// (mind a small sigaltstack).
//
// After fork() (palrt/pal/fork.hpp): the barrier is the child's, with the strategy and state
// the parent had, and a flush reaches the child's own threads. A membarrier registration is
// inherited: the kernel keeps it with the address space, which fork() copies and only exec
// clears, so the child is registered without registering again (tests/test_fork.cpp checks
// it). fork() waits for an initialisation, an mprotect toggle or a signal round in progress,
// so a child never inherits one half done with its lock held.
//
// Initialisation depends on nothing else in palrt being initialised, and runs on first use
// if nobody called initialize_process_barrier() first: then inside whatever call flushes
// first (a collector's first grace period, an identity cache's first reclamation), whenever
// that is, and the state says so (initialized_on_first_use).
//
// Plugin hosts (palrt loaded into a process that did not start through
// palrt::startup::bootstrap(), which does this first): call initialize_process_barrier() as
// early as you can, before creating a collector or cache, and best while the process still
// has one thread (a library constructor, or the host's own early startup). Registering for
// membarrier is fast only while the process has one thread; with threads alive the kernel
// waits out an RCU grace period (milliseconds) and IPIs every CPU. The call is idempotent,
// cheap once done, and reports what it chose; on first use the same registration happens
// later, with the host's threads alive, and a failure aborts instead of throwing.
//
// CoreCLR's spelling, FlushProcessWriteBuffers(), is in palrt/pal/compat.hpp.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace palrt::pal {

enum class barrier_strategy { membarrier, mprotect, signal };

std::string_view to_string(barrier_strategy s) noexcept;
[[nodiscard]] std::optional<barrier_strategy> parse_barrier_strategy(std::string_view name) noexcept;

// The signal the signal strategy uses (SIGRTMAX - 1). Blocking it in a thread makes
// a flush wait until that thread unblocks it, exits, or is seen asleep in the kernel
// (/proc/<pid>/task/<tid>/syscall; a process that is not dumpable cannot read it, and there
// a flush waits for a sleeping thread that blocks the signal until it wakes).
int barrier_signal_number() noexcept;

// Whether initialisation may register for membarrier. The startup orderings map onto this:
// registered-first and threads-first register (at different times), no-membarrier does not.
enum class registration_mode { register_membarrier, skip_membarrier };

// When initialisation counts the threads alive at registration (a /proc read, ~15-50 us).
enum class registration_census {
  if_slow,  // only when the registration does not look like the kernel's fast path (default:
            // the startup path stays free of procfs reads)
  always,   // always (for reports that show the count)
};

struct process_barrier_state {
  barrier_strategy strategy;
  bool forced = false;                // chosen through PALRT_BARRIER
  std::uint32_t membarrier_mask = 0;  // QUERY result (0 when denied or skipped)
  int registration_error = 0;         // errno of a failed registration, 0 if none / skipped
  bool registered = false;            // this process is registered for PRIVATE_EXPEDITED
  // Threads of this process counted from /proc right after registration (before palrt
  // starts any thread), or 0 when not counted: no registration, /proc unreadable, or
  // registration_census::if_slow and either the registration looked fast or the process's
  // earlier registrant (palrt's preload shim) recorded that it registered with one thread.
  int threads_at_registration = 0;
  // The registration looked like the kernel's single-threaded fast path: a first
  // registration that took under 200 us. Inferred from timing, not counted: with
  // rcu_expedited=1 or one CPU online a registration with threads alive is this fast too.
  bool fast_path_inferred = false;
  std::int64_t registration_started_ns = 0;  // CLOCK_MONOTONIC
  std::int64_t registration_ns = 0;          // QUERY + REGISTER duration (census excluded)
  // Nobody called initialize_process_barrier(): the first flush_process_write_buffers()
  // initialised it (a collector's first grace period, say), with the host's threads most
  // likely alive, so the registration took the kernel's slow path inside that call.
  bool initialized_on_first_use = false;
};

// Thrown when no strategy can be set up, or when the forced one is unavailable.
// code() carries the errno of the failure (ENOTSUP: the forced strategy is no barrier on
// this machine).
class barrier_error : public std::system_error {
 public:
  using std::system_error::system_error;
};

// Chooses and sets up the strategy (idempotent: later calls return the first result and
// ignore their arguments). Thread-safe. Throws barrier_error when no strategy can be set up
// or the one forced by PALRT_BARRIER cannot (or PALRT_BARRIER names no strategy); a failed
// initialisation leaves nothing behind, and a later call tries again.
const process_barrier_state& initialize_process_barrier(registration_mode mode = registration_mode::register_membarrier,
                                                        registration_census census = registration_census::if_slow);

// The state, or nullptr before initialisation.
const process_barrier_state* process_barrier_state_if_initialized() noexcept;

// The barrier. Initialises with register_membarrier on first use, and then aborts with a
// message on stderr if no strategy works (call initialize_process_barrier() first to handle
// that as an exception instead). Once initialised it cannot fail: a strategy that stops
// working (a seccomp filter installed later denying membarrier or mprotect, /proc gone or
// the signal taken by the host for the signal strategy) aborts with a message rather than
// return without a barrier. Once initialised, async-signal-safe, also in a handler that
// interrupted a flush (see "From a signal handler" above).
void flush_process_write_buffers();

// What one flush of the process's barrier costs here, now: the median over 5 rounds of
// `flushes_per_round` flushes of the wall time per flush, in ns. Grace periods built on the
// barrier size their batching by it; the cost depends on the strategy and on how many CPUs
// run threads of this process. Initialises the barrier if needed (throws barrier_error like
// initialize_process_barrier()).
[[nodiscard]] double measure_flush_cost_ns(int flushes_per_round = 1000);

}  // namespace palrt::pal

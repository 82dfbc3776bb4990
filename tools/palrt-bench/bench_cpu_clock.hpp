// SPDX-License-Identifier: MIT
// Threads' CPU clocks: what the CPU-timed twin of every timed palrt-bench figure is read from
// (bench_timing.hpp's stopwatch and timed_run::cpu; bench_disturbance.hpp says what the
// comparison of the two tells).
//
// A benchmark's own threads read their clock themselves (CLOCK_THREAD_CPUTIME_ID). A thread
// palrt starts (the sync manager's worker, the finalizer thread) runs code the benchmark does
// not write; the benchmark learns its clock once, from inside (this_thread_cpu_clock(), run on
// that thread through an invoke or a finalizer), and reads it from outside with cpu_time().
//
// Reading a CPU clock is a system call (the vDSO serves only the wall clocks): ~0.1-1 us on
// these VMs. Read one per run or per slice, never per operation.
#pragma once

#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <system_error>

namespace palrt::bench {

// The CPU time so far of the thread whose clock `clock` is (CLOCK_THREAD_CPUTIME_ID: the
// calling thread). Throws std::system_error if it cannot be read (another thread's clock,
// once that thread has exited): a figure without its twin would silently read disturbed.
inline std::chrono::nanoseconds cpu_time(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0)
    throw std::system_error(errno, std::generic_category(), "clock_gettime on a thread's CPU clock");
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

inline std::chrono::nanoseconds this_thread_cpu_time() { return cpu_time(CLOCK_THREAD_CPUTIME_ID); }

// The calling thread's CPU clock, in a form any thread of the process can read with cpu_time().
inline clockid_t this_thread_cpu_clock() {
  clockid_t clock{};
  // pthread_getcpuclockid returns the error number; it does not set errno.
  if (const int error = ::pthread_getcpuclockid(::pthread_self(), &clock); error != 0)
    throw std::system_error(error, std::generic_category(), "pthread_getcpuclockid");
  return clock;
}

}  // namespace palrt::bench

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
// Reading a CPU clock is a system call (the vDSO serves only the wall clocks): ~1.5 us of CPU
// on the VMs of docs/BENCHMARKS.md, 60 times a wall-clock read. Read one per run or per
// slice, never per operation, and outside the wall time a figure reports (stopwatch).
#pragma once

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
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

// What two reads of the calling thread's CPU clock in a row find between them: the end of the
// first read and the start of the second, which every stretch timed by two reads holds
// besides its own work (~1.5 us here). bench_timing.hpp's stopwatch subtracts it, so that a
// stretch of a few microseconds (a young collection) is not read as disturbed for the clock
// reads around it. Measured once per process, the first time it is asked for (~0.2 ms): the
// median of 63 back-to-back pairs, so a pair that an interrupt lands in does not count.
inline std::chrono::nanoseconds cpu_clock_read_cost() {
  static const std::chrono::nanoseconds cost = [] {
    std::array<std::chrono::nanoseconds, 63> pairs{};
    for (auto& between : pairs) {
      const std::chrono::nanoseconds first = this_thread_cpu_time();
      between = this_thread_cpu_time() - first;
    }
    const auto middle = pairs.begin() + static_cast<std::ptrdiff_t>(pairs.size() / 2);
    std::nth_element(pairs.begin(), middle, pairs.end());
    return *middle;
  }();
  return cost;
}

// The calling thread's CPU clock, in a form any thread of the process can read with cpu_time().
inline clockid_t this_thread_cpu_clock() {
  clockid_t clock{};
  // pthread_getcpuclockid returns the error number; it does not set errno.
  if (const int error = ::pthread_getcpuclockid(::pthread_self(), &clock); error != 0)
    throw std::system_error(error, std::generic_category(), "pthread_getcpuclockid");
  return clock;
}

}  // namespace palrt::bench

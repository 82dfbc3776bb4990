// SPDX-License-Identifier: MIT
// A team of threads that run the same measured work at the same moment, for components whose
// `threads` counts threads doing the measured operation (DESIGN.md: ns_per_op is wall time
// over the operations of all of them, so perfect scaling halves it).
//
// The calling thread is member 0 and does its share; the other members are started once,
// through palrt's thread factory like every thread of a palrt process, and wait between runs.
// run() releases every member at once and returns when all are done, so a component can cut a
// measurement into 1 ms slices (bench_timing.hpp) and interleave variants across the whole
// team: a member that waits between slices spins for a few microseconds before it yields, so
// it sees the next slice's start within a fraction of a microsecond and the start skew stays
// far below a slice. A member that waits longer (setup between cases) sleeps in the kernel.
//
// Member i runs on cpus[i % cpus.size()] when the list is not empty (best effort, like the
// barrier benchmark's pinning); the calling thread's mask is restored when the team goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <palrt/pal/internal/cpu_relax.hpp>
#include <palrt/pal/thread_factory.hpp>

#include "bench_affinity.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {

using pal::internal::cpu_relax;  // one turn of a spin-wait

class thread_team {
 public:
  // Starts size - 1 threads named `<name>-<i>` (size >= 1) and pins the calling thread to
  // cpus[0]. Throws what the thread factory throws, having stopped what it started.
  thread_team(int size, std::vector<int> cpus, const char* name);
  ~thread_team();
  thread_team(const thread_team&) = delete;
  thread_team& operator=(const thread_team&) = delete;

  int size() const noexcept { return size_; }
  // Members that were pinned to their CPU (the calling thread included).
  int pinned() const noexcept;
  // The CPUs the members occupy (cpus_occupied): what the team's CPU-timed twin divides by.
  int cpus_used() const noexcept { return cpus_used_; }

  // Runs work(i) on member i, all at once (member 0 on the calling thread), and returns when
  // every member returned. What a member throws is rethrown here (the first one).
  void run(const std::function<void(int member)>& work);

 private:
  struct control;
  void stop_members() noexcept;

  int size_;
  int cpus_used_ = 1;
  std::shared_ptr<control> control_;
  affinity_guard restore_affinity_;
  std::vector<palrt::pal::managed_thread> threads_;
};

// The CPUs a team measures on: the calling thread's current CPU first, then the others
// (member i goes on [i % size]); empty where there is only one CPU to run on.
std::vector<int> team_cpus();

// One member's share of a slice: when it started and stopped, how many ops it did, and its
// CPU time in between. A member times its share with a stopwatch (or run_for, which does)
// and records it with member_run::of.
struct member_run {
  bench_clock::time_point start{};
  bench_clock::time_point end{};
  std::uint64_t ops = 0;
  std::chrono::nanoseconds cpu{0};

  // The share that started at `start` and ran `r` (r.ops operations; a caller whose op is a
  // batch scales them first).
  static member_run of(bench_clock::time_point start, const timed_run& r) noexcept {
    return {start, start + r.elapsed, r.ops, r.cpu};
  }
};

// The team's slice as one timed_run: every member's ops, over the wall time from the first
// member's start to the last member's end (DESIGN.md's ns_per_op for `threads` > 1), and the
// members' CPU times per CPU they occupied: their sum / `cpus` (thread_team::cpus_used();
// bench_timing.hpp's timed_run says why).
timed_run team_result(const std::vector<member_run>& members, int cpus);

// Runs work(i) on every member, as run() does, each member's part timed by its own stopwatch:
// the run as one timed_run of no ops (the caller knows what it counts), for a case whose
// measured region is the whole of each member's work (a collection shared by GC threads).
timed_run run_timed(thread_team& team, const std::function<void(int member)>& work);

}  // namespace palrt::bench

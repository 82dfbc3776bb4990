// SPDX-License-Identifier: MIT
#include "bench_thread_team.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace palrt::bench {

namespace {

// How a waiting member or the caller waits: spin first (the next slice starts within
// microseconds), then yield (a member that shares its CPU with another lets it run), then,
// for the waits between cases, sleep in the kernel if the caller can.
constexpr auto spin_for = std::chrono::microseconds(50);
constexpr auto yield_for = std::chrono::milliseconds(2);

}  // namespace

struct thread_team::control {
  // Bumped by run() to start the members (and by the destructor to stop them), each on its
  // own cache line: the members read `generation` in a tight loop while the caller writes
  // `done` and the members count themselves in it.
  alignas(64) std::atomic<std::uint64_t> generation{0};
  alignas(64) std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::atomic<int> pinned{0};
  std::atomic<int> started{0};  // members running their loop (release: `pinned` is counted)
  // Written by run() before it bumps `generation` (release), read by the members after they
  // see the new generation (acquire).
  const std::function<void(int)>* work = nullptr;
  std::vector<std::exception_ptr> errors;  // member i writes [i] only, before counting done
  std::vector<int> cpus;
};

thread_team::thread_team(int size, std::vector<int> cpus, const char* name)
    : size_(std::max(1, size)), control_(std::make_shared<control>()) {
  control_->errors.resize(static_cast<std::size_t>(size_));
  control_->cpus = std::move(cpus);
  if (!control_->cpus.empty() && pin_current_thread(control_->cpus.front()))
    control_->pinned.fetch_add(1, std::memory_order_relaxed);
  try {
    for (int i = 1; i < size_; ++i) {
      const std::string thread_name = std::string(name) + "-" + std::to_string(i);
      threads_.push_back(palrt::pal::start_thread({thread_name}, [c = control_, i] {
        // The body owns its own reference to the control block (a detached member never
        // reads freed memory), so it does not use `this`.
        if (!c->cpus.empty() && pin_current_thread(c->cpus[static_cast<std::size_t>(i) % c->cpus.size()]))
          c->pinned.fetch_add(1, std::memory_order_relaxed);
        c->started.fetch_add(1, std::memory_order_release);
        std::uint64_t seen = 0;
        for (;;) {
          // acquire: pairs with run()'s release bump; `work` and the run's inputs are visible.
          std::uint64_t g = c->generation.load(std::memory_order_acquire);
          if (g == seen) {
            const auto waiting_since = bench_clock::now();
            for (unsigned n = 0; (g = c->generation.load(std::memory_order_acquire)) == seen; ++n) {
              if (n % 64 != 0) {
                cpu_relax();
                continue;
              }
              const auto waited = bench_clock::now() - waiting_since;
              if (waited < spin_for) continue;
              if (waited < yield_for) {
                sched_yield();
                continue;
              }
              c->generation.wait(seen, std::memory_order_acquire);
            }
          }
          seen = g;
          if (c->stop.load(std::memory_order_acquire)) return;
          try {
            (*c->work)(i);
          } catch (...) {
            c->errors[static_cast<std::size_t>(i)] = std::current_exception();
          }
          // release: the member's results (and errors[i]) are visible to run()'s acquire.
          c->done.fetch_add(1, std::memory_order_release);
        }
      }));
    }
    // Returns once every member runs (and has pinned itself), so pinned() is the final count.
    const auto deadline = bench_clock::now() + std::chrono::seconds(10);
    while (control_->started.load(std::memory_order_acquire) < size_ - 1) {
      if (bench_clock::now() > deadline)
        throw std::runtime_error(std::string("team threads ") + name + "-* did not start within 10 s");
      sched_yield();
    }
    std::vector<int> assigned;
    for (int i = 0; i < size_ && !control_->cpus.empty(); ++i)
      assigned.push_back(control_->cpus[static_cast<std::size_t>(i) % control_->cpus.size()]);
    cpus_used_ = cpus_occupied(assigned, pinned() == size_, static_cast<int>(control_->cpus.size()));
  } catch (...) {
    stop_members();
    throw;
  }
}

thread_team::~thread_team() { stop_members(); }

void thread_team::stop_members() noexcept {
  control_->stop.store(true, std::memory_order_release);
  control_->generation.fetch_add(1, std::memory_order_release);
  control_->generation.notify_all();
  for (auto& t : threads_) {
    // A member finishes its current work (bounded: a slice, or a run's budget) and then sees
    // the stop. One that does not is detached; it holds its own reference to the control.
    if (t.joinable() && !t.join_for(std::chrono::seconds(10))) {
      std::fprintf(stderr, "palrt-bench: team thread %s did not stop within 10 s\n", t.name().c_str());
      t.detach();
    }
  }
  threads_.clear();
}

int thread_team::pinned() const noexcept { return control_->pinned.load(std::memory_order_relaxed); }

void thread_team::run(const std::function<void(int)>& work) {
  control& c = *control_;
  c.work = &work;
  c.done.store(0, std::memory_order_relaxed);
  for (auto& e : c.errors) e = nullptr;
  // release: the members that see this generation see `work`, the cleared errors and
  // whatever the caller prepared for the run.
  c.generation.fetch_add(1, std::memory_order_release);
  c.generation.notify_all();
  try {
    work(0);
  } catch (...) {
    c.errors[0] = std::current_exception();
  }
  const int others = size_ - 1;
  const auto waiting_since = bench_clock::now();
  for (unsigned n = 0; c.done.load(std::memory_order_acquire) < others; ++n) {
    if (n % 64 != 0) {
      cpu_relax();
      continue;
    }
    if (bench_clock::now() - waiting_since >= spin_for) sched_yield();
  }
  for (const auto& e : c.errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::vector<int> team_cpus() {
  const cpu_plan plan = plan_cpus();
  std::vector<int> cpus;
  if (!plan.measuring_cpu) return cpus;
  cpus.push_back(*plan.measuring_cpu);
  cpus.insert(cpus.end(), plan.load_cpus.begin(), plan.load_cpus.end());
  return cpus;
}

timed_run team_result(const std::vector<member_run>& members, int cpus) {
  if (members.empty()) return {};
  auto first = members.front().start;
  auto last = members.front().end;
  std::uint64_t ops = 0;
  std::chrono::nanoseconds cpu{0};
  for (const auto& m : members) {
    first = std::min(first, m.start);
    last = std::max(last, m.end);
    ops += m.ops;
    cpu += m.cpu;
  }
  return {ops, std::chrono::duration_cast<std::chrono::nanoseconds>(last - first),
          cpu / std::max<std::int64_t>(1, cpus)};
}

timed_run run_timed(thread_team& team, const std::function<void(int)>& work) {
  std::vector<member_run> runs(static_cast<std::size_t>(team.size()));
  team.run([&](int member) {
    const stopwatch timer;
    work(member);
    runs[static_cast<std::size_t>(member)] = member_run::of(timer.started(), timer.stop(0));
  });
  return team_result(runs, team.cpus_used());
}

}  // namespace palrt::bench

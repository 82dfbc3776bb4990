// SPDX-License-Identifier: MIT
// palrt-bench barrier: FlushProcessWriteBuffers beside its baselines.
//
// Case `flush`, metric ns_per_op. Variants:
//   palrt           palrt::pal::flush_process_write_buffers(), the strategy the process chose
//   raw-membarrier  the bare membarrier(PRIVATE_EXPEDITED) syscall: the floor palrt is held to
//                   (target: palrt <= 1.10x raw-membarrier when the strategy is membarrier)
//   mprotect        the mprotect strategy, forced through process_barrier_access::make_instance()
//   signal          the signal strategy, forced the same way
// A variant that cannot work here (membarrier denied by seccomp, mprotect on arm64, ...) is
// reported as skipped with the reason and left out of the results.
//
// A process barrier only costs anything when other threads of the process are running: the
// membarrier and mprotect strategies interrupt the CPUs that run this process's threads, the
// signal strategy wakes every thread. So each variant is measured while `threads` other
// threads spin on the other CPUs.

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <palrt/pal/internal/barrier_strategies.hpp>
#include <palrt/pal/membarrier.hpp>
#include <palrt/pal/process_barrier.hpp>
#include <palrt/pal/thread_factory.hpp>

#include "bench_affinity.hpp"
#include "bench_component.hpp"
#include "bench_cpu_clock.hpp"
#include "bench_report.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {

namespace {

constexpr const char* flush_case = "flush";
constexpr const char* ns_per_op = "ns_per_op";

// Threads of this process that spin on other CPUs while the measuring thread flushes. They do
// no flushes themselves; they are what each barrier has to reach. They start through palrt's
// thread factory, like every thread of a palrt process, so registration has happened before
// any of them exists.
class busy_threads {
 public:
  // Starts `count` threads; thread i is pinned to load_cpus[i % size] when possible. Returns
  // once all of them are spinning.
  busy_threads(int count, const std::vector<int>& load_cpus) : control_(std::make_shared<control>(count)) {
    try {
      for (int i = 0; i < count; ++i) {
        const std::optional<int> cpu =
            load_cpus.empty() ? std::nullopt
                              : std::optional<int>(load_cpus[static_cast<std::size_t>(i) % load_cpus.size()]);
        threads_.push_back(start_busy_thread(i, cpu));
      }
      wait_until_spinning(count);
    } catch (...) {
      stop_and_join();
      throw;
    }
  }

  ~busy_threads() { stop_and_join(); }

  busy_threads(const busy_threads&) = delete;
  busy_threads& operator=(const busy_threads&) = delete;

  int pinned() const noexcept { return control_->pinned.load(std::memory_order_relaxed); }

  // The busy threads' CPU time so far, all of them together.
  std::chrono::nanoseconds cpu_time() const {
    std::chrono::nanoseconds sum{0};
    for (const clockid_t clock : control_->clocks) sum += palrt::bench::cpu_time(clock);
    return sum;
  }

 private:
  struct control {
    explicit control(int count) : clocks(static_cast<std::size_t>(count)) {}
    // On its own cache line: the busy threads read it in a tight loop, and no write of the
    // measuring thread to a neighbouring variable may invalidate it mid-measurement.
    alignas(64) std::atomic<bool> stop{false};
    alignas(64) std::atomic<int> spinning{0};
    std::atomic<int> pinned{0};
    // Busy thread i's CPU clock, written by it before it counts itself in `spinning`.
    std::vector<clockid_t> clocks;
  };

  palrt::pal::managed_thread start_busy_thread(int index, std::optional<int> cpu) {
    const std::string name = "bench-busy-" + std::to_string(index);
    try {
      return palrt::pal::start_thread({name}, [c = control_, cpu, index] { spin(*c, cpu, index); });
    } catch (const std::exception& e) {
      // The thread factory refuses when the registration it requires fails (a forced strategy
      // denied by seccomp, say); say which step failed, not only why.
      throw std::runtime_error("cannot start busy thread " + name + ": " + e.what());
    }
  }

  static void spin(control& c, std::optional<int> cpu, int index) {
    // A thread that cannot be pinned keeps the mask it inherited (the measuring thread's,
    // before that is pinned) and runs where the scheduler puts it.
    if (cpu && pin_current_thread(*cpu)) c.pinned.fetch_add(1, std::memory_order_relaxed);
    c.clocks[static_cast<std::size_t>(index)] = this_thread_cpu_clock();
    // Release, paired with the acquire in wait_until_spinning(): the starter that sees this
    // thread counted also sees its `pinned` increment and its clock, so the progress line is
    // right and cpu_time() reads every clock.
    c.spinning.fetch_add(1, std::memory_order_release);
    // Relaxed: `stop` publishes no data, the thread only has to see it eventually. A relaxed
    // load is a plain load on x86-64 and arm64, so the loop keeps the CPU busy in user mode,
    // which is the state a barrier has to interrupt.
    while (!c.stop.load(std::memory_order_relaxed)) {
    }
  }

  void wait_until_spinning(int count) const {
    const auto deadline = bench_clock::now() + std::chrono::seconds(10);
    while (control_->spinning.load(std::memory_order_acquire) < count) {
      if (bench_clock::now() > deadline) {
        throw std::runtime_error("busy threads did not start within 10 s (" +
                                 std::to_string(control_->spinning.load(std::memory_order_relaxed)) + " of " +
                                 std::to_string(count) + " running)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void stop_and_join() {
    control_->stop.store(true, std::memory_order_relaxed);
    for (auto& t : threads_) {
      // A spinning thread sees `stop` within microseconds. If one still does not finish, it
      // is detached; it holds its own reference to `control`, so nothing it reads is freed.
      if (t.joinable() && !t.join_for(std::chrono::seconds(10))) {
        std::fprintf(stderr, "palrt-bench barrier: busy thread %s did not stop within 10 s\n", t.name().c_str());
        t.detach();
      }
    }
    threads_.clear();
  }

  std::shared_ptr<control> control_;
  std::vector<palrt::pal::managed_thread> threads_;
};

// The bare syscall, with nothing of palrt between the loop and the kernel.
long raw_private_expedited() noexcept { return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); }

// Every variant runs through run_for() with its operation inlined into the same loop, so the
// loops around the operations are identical and a ratio compares the operations.
template <class Op>
measured_variant variant(std::string name, Op op) {
  return {std::move(name), [op](std::chrono::nanoseconds budget) { return run_for(budget, op); }};
}

std::optional<measured_variant> palrt_variant_if_available(bench_report& report) {
  try {
    // Idempotent; main already initialised the barrier while the process had one thread.
    palrt::pal::initialize_process_barrier();
  } catch (const palrt::pal::barrier_error& e) {
    report.skipped(palrt_variant, e.what());
    return std::nullopt;
  }
  return variant(std::string(palrt_variant), [] { palrt::pal::flush_process_write_buffers(); });
}

std::optional<measured_variant> raw_membarrier_variant_if_available(bench_report& report) {
  if (raw_private_expedited() != 0) {
    int error = errno;
    // EPERM can also mean "not registered": palrt need not have registered (PALRT_BARRIER may
    // force another strategy). The baseline then registers for itself, before the busy threads
    // start, and is skipped only if the kernel or a seccomp filter refuses.
    if (error == EPERM) {
      if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
          raw_private_expedited() == 0) {
        error = 0;
      } else {
        error = errno;
      }
    }
    if (error != 0) {
      report.skipped("raw-membarrier", std::string(palrt::pal::membarrier::describe(error)));
      return std::nullopt;
    }
  }
  // The syscall worked once; if it ever fails mid-run the numbers are void, so the run stops.
  auto failures = std::make_shared<std::uint64_t>(0);
  auto measure = variant("raw-membarrier", [failures] {
    if (raw_private_expedited() != 0) ++*failures;
  });
  return measured_variant{measure.name, [failures, run = measure.run](std::chrono::nanoseconds budget) {
                            const timed_run r = run(budget);
                            if (*failures != 0) {
                              throw std::runtime_error("membarrier(PRIVATE_EXPEDITED) failed " +
                                                       std::to_string(*failures) + " times mid-run");
                            }
                            return r;
                          }};
}

std::optional<measured_variant> forced_strategy_variant_if_available(palrt::pal::barrier_strategy strategy,
                                                                     bench_report& report) {
  const std::string name(palrt::pal::to_string(strategy));
  try {
    std::shared_ptr<palrt::pal::internal::barrier_instance> instance =
        palrt::pal::internal::process_barrier_access::make_instance(strategy);
    return variant(name, [instance] { instance->flush(); });
  } catch (const palrt::pal::barrier_error& e) {
    report.skipped(name, e.what());
    return std::nullopt;
  }
}

std::string describe_flush_case(const bench_settings& settings) {
  const auto budget_ms = std::chrono::duration_cast<std::chrono::milliseconds>(settings.run_budget()).count();
  return "one process-wide barrier per op, called in a loop by the measuring thread; threads = other "
         "threads of the process spinning busy meanwhile, pinned to CPUs other than the measuring "
         "thread's where possible (more busy threads than CPUs share them); they do no ops, they are "
         "what each barrier must reach. ns_per_op = the measuring thread's wall time / its flushes "
         "(its CPU-timed twin: the CPU time of the measuring thread and the busy threads per CPU they "
         "occupy / the flushes), "
         "per slice of 1 ms (or of the slowest op), the variants' slices interleaved in shuffled "
         "order; median of the slices of each of " +
         std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(budget_ms) +
         " ms per variant, then median of the repetitions.";
}

std::string format_ns(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

void run_barrier(const bench_settings& settings, bench_report& report) {
  // Thread counts mean busy threads here; zero would leave nothing for a barrier to reach.
  const std::vector<int> thread_counts = settings.thread_counts({1, 2});

  // All variants are set up before any busy thread exists: setting up a strategy (registering,
  // installing a signal handler, locking the helper page) is not what is measured.
  std::vector<measured_variant> variants;
  for (auto v : {palrt_variant_if_available(report), raw_membarrier_variant_if_available(report),
                 forced_strategy_variant_if_available(palrt::pal::barrier_strategy::mprotect, report),
                 forced_strategy_variant_if_available(palrt::pal::barrier_strategy::signal, report)}) {
    if (v) variants.push_back(std::move(*v));
  }
  if (variants.empty()) return;  // each was reported as skipped; the tool reports "nothing measured"
  report.describe_case(flush_case, describe_flush_case(settings));

  const cpu_plan plan = plan_cpus();
  for (const int threads : thread_counts) {
    // The busy threads start before the measuring thread is pinned, so one that cannot pin
    // itself inherits the full mask rather than the measuring thread's CPU.
    busy_threads busy(threads, plan.load_cpus);
    affinity_guard restore_affinity;
    const bool measuring_pinned = plan.measuring_cpu && pin_current_thread(*plan.measuring_cpu);

    std::string where = measuring_pinned ? "measuring on CPU " + std::to_string(*plan.measuring_cpu)
                                         : std::string("measuring thread not pinned");
    where += ", " + std::to_string(busy.pinned()) + " of " + std::to_string(threads) + " busy threads pinned";
    report.progress(std::string(flush_case) + " with " + std::to_string(threads) + " busy thread" +
                    (threads == 1 ? "" : "s") + " (" + where + "): " + std::to_string(variants.size()) +
                    " variants x " + std::to_string(settings.repetitions()) + " repetitions");

    // The CPU-timed twin counts the busy threads beside the flushing one: a barrier costs what
    // it costs because they run (a busy thread another process has descheduled needs no IPI),
    // so a run in which they lost their CPUs is as disturbed as one in which the flushing
    // thread lost its own. Their clocks are read around each run, just outside it.
    // Per CPU they occupy: two busy threads on the one load CPU of a 2-vCPU machine share it.
    std::vector<int> occupied;
    if (plan.measuring_cpu) occupied.push_back(*plan.measuring_cpu);
    for (int i = 0; i < threads && !plan.load_cpus.empty(); ++i)
      occupied.push_back(plan.load_cpus[static_cast<std::size_t>(i) % plan.load_cpus.size()]);
    const int cpus = cpus_occupied(occupied, measuring_pinned && busy.pinned() == threads,
                                   static_cast<int>(plan.load_cpus.size()) + 1);
    std::vector<measured_variant> with_busy;
    for (const auto& v : variants) {
      with_busy.push_back({v.name, [&busy, cpus, run = v.run](std::chrono::nanoseconds budget) {
                             const std::chrono::nanoseconds busy_before = busy.cpu_time();
                             timed_run r = run(budget);
                             const std::chrono::nanoseconds busy_cpu = busy.cpu_time() - busy_before;
                             r.cpu = (r.cpu + busy_cpu) / cpus;
                             return r;
                           }});
    }
    const auto samples = sample_ns_per_op_interleaved(with_busy, settings.repetitions(), settings.run_budget());
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const sample_spread s = spread_of(samples[i].wall);
      const double cpu = median(samples[i].cpu);
      report.add({flush_case, variants[i].name, threads, ns_per_op, s.median, cpu});
      report.progress("  " + variants[i].name + ": " + format_ns(s.median) + " ns/op (repetitions " + format_ns(s.min) +
                      " .. " + format_ns(s.max) + ")" + cpu_clock_note(s.median, cpu));
    }
  }
}

}  // namespace

bench_component barrier_component() {
  return {"barrier",
          "FlushProcessWriteBuffers: palrt's barrier beside the bare membarrier syscall and the forced "
          "mprotect and signal strategies, with 1 and 2 busy threads",
          run_barrier};
}

}  // namespace palrt::bench

// SPDX-License-Identifier: MIT
// palrt-bench invoke: the sync manager's work queue and waits beside their baselines.
//
// Cases (DESIGN.md metrics):
//   invoke       cross-thread round trip: a caller hands a tiny function to the server
//                thread and waits for its result. p50_ns, p99_ns (per call, as the caller
//                sees it), allocs_per_op (every thread's heap allocations / calls).
//   post         fire-and-forget: callers queue tiny functions as fast as the server runs
//                them (at most 1024 outstanding per caller). ops_per_s (functions run per
//                second, the final drain included), allocs_per_op.
//   invoke/idle  as invoke, but each call comes after the caller slept idle_gap (1 ms, far
//                longer than palrt's spin bound, sync_manager::max_spin): the server is parked
//                and has to be woken. p50_ns, p99_ns.
// Every case of invoke, post and invoke/idle also reports worker_cpu_ns_per_op: the server
// thread's CPU time (its clock_gettime(pthread_getcpuclockid) clock) over a whole repetition,
// the other variants' slices included, so that a server which spins after its slice is charged
// for it, divided by its variant's operations. It is what spinning costs: a server that parks
// at once burns only what running the items takes.
//   wait-any-64  palrt only: a thread blocked in wait_any over 64 auto-reset events; another
//                sets one of them (a different one each time). p50_ns from the set() call to
//                the waiter's return.
// Variants (invoke, post): palrt (sync_manager::invoke/post at normal priority), condvar (a
// std::deque of std::function under a std::mutex, a std::condition_variable for the server
// and one per call for the caller: the textbook ping-pong), asio (boost::asio::io_context
// and boost::asio::post, the call's completion signalled as in condvar).
// `threads` counts the calling threads; there is one server thread per variant.
// Disturbed runs (bench_report.hpp): post's ops_per_s has a CPU-timed twin, from the CPU
// clocks of the callers (each over its part of a slice) and of the server (over the slice),
// per CPU they occupy; invoke's p50_ns / p99_ns take the same run's verdict. invoke/idle has
// none: its threads sleep by design.
// Targets (issue 15): post ops_per_s >= 1.5x condvar and asio at 1 caller, >= 1.0x at 2; invoke
// p50 <= 0.25x condvar; invoke/idle p50 no worse than condvar; 0 allocs per invoke and post.

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <palrt/pal/thread_factory.hpp>
#include <palrt/pal/wake_event.hpp>
#include <palrt/sync/event.hpp>
#include <palrt/sync/sync_manager.hpp>
#include <palrt/sync/wait.hpp>

#include "alloc_counter.hpp"
#include "bench_affinity.hpp"
#include "bench_component.hpp"
#include "bench_cpu_clock.hpp"
#include "bench_latency.hpp"
#include "bench_line_transfer.hpp"
#include "bench_report.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {
namespace {

// The most calls one caller records latencies for per repetition; beyond it calls still
// count, only their latency is not kept (4 bytes each, reserved before measuring so that
// recording allocates nothing).
constexpr std::size_t max_recorded_per_caller = std::size_t{1} << 20;
// Flow control for `post`: a caller waits for the server while this many of its items are
// queued, so the queue (and a baseline's memory) stays bounded.
constexpr std::uint64_t max_outstanding_posts = 1024;
// invoke/idle: how long a caller sleeps before each call, so that the server has been idle far
// longer than any spin bound (palrt's is sync_manager::max_spin, 100 us) and parks.
constexpr std::chrono::milliseconds idle_gap{1};
constexpr int idle_calls_per_slice = 4;

// --- Servers: one thread each, serving one variant --------------------------------------------

class server {
 public:
  virtual ~server() = default;
  // Runs x + 1 on the server thread and returns it.
  virtual std::uint64_t invoke(std::uint64_t x) = 0;
  // Queues `++executed` to the server thread (release: the caller's acquire load that sees the
  // count sees the item done, so it may free what the item touched).
  virtual void post(std::atomic<std::uint64_t>& executed) = 0;
  // Pins the server thread to `cpu` (best effort).
  virtual void pin(int cpu) = 0;
  // The server thread's CPU time so far.
  std::int64_t worker_cpu_ns() const { return cpu_time(cpu_clock_).count(); }

 protected:
  // Set by each server once its thread runs: this_thread_cpu_clock() run there.
  clockid_t cpu_clock_{};
};

class palrt_server final : public server {
 public:
  palrt_server() {
    manager_.ensure_worker_started();
    cpu_clock_ = manager_.invoke(sync::work_priority::normal, [] { return this_thread_cpu_clock(); });
  }
  ~palrt_server() override { (void)manager_.stop(); }
  std::uint64_t invoke(std::uint64_t x) override {
    return manager_.invoke(sync::work_priority::normal, [x] { return x + 1; });
  }
  void post(std::atomic<std::uint64_t>& executed) override {
    manager_.post(sync::work_priority::normal, [&executed] { executed.fetch_add(1, std::memory_order_release); });
  }
  void pin(int cpu) override {
    manager_.invoke(sync::work_priority::normal, [cpu] { pin_current_thread(cpu); });
  }

 private:
  sync::sync_manager manager_;
};

// What both baselines share: a caller waits for its call with a mutex and a condition
// variable, as code without palrt would.
struct baseline_call {
  std::uint64_t in = 0, out = 0;
  bool done = false;
  std::condition_variable cv;
};

class condvar_server final : public server {
 public:
  condvar_server() : thread_(pal::start_thread({"bench-condvar"}, [this] { loop(); })) {
    std::mutex m;
    std::condition_variable cv;
    bool known = false;
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([&] {
        std::lock_guard known_lock(m);
        cpu_clock_ = this_thread_cpu_clock();
        known = true;
        cv.notify_one();
      });
    }
    work_.notify_one();
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return known; });
  }
  ~condvar_server() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_one();
    thread_.join();
  }
  std::uint64_t invoke(std::uint64_t x) override {
    baseline_call call;
    call.in = x;
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([this, &call] {
        std::lock_guard done_lock(mutex_);
        call.out = call.in + 1;
        call.done = true;
        call.cv.notify_one();  // under the lock: the caller cannot return and destroy cv first
      });
    }
    work_.notify_one();
    std::unique_lock lock(mutex_);
    call.cv.wait(lock, [&] { return call.done; });
    return call.out;
  }
  void post(std::atomic<std::uint64_t>& executed) override {
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([&executed] { executed.fetch_add(1, std::memory_order_release); });
    }
    work_.notify_one();
  }
  void pin(int cpu) override {
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([cpu] { pin_current_thread(cpu); });
    }
    work_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  pal::managed_thread thread_;
};

class asio_server final : public server {
 public:
  asio_server()
      : guard_(boost::asio::make_work_guard(context_)),
        thread_(pal::start_thread({"bench-asio"}, [this] { context_.run(); })) {
    std::mutex m;
    std::condition_variable cv;
    bool known = false;
    boost::asio::post(context_, [&] {
      std::lock_guard known_lock(m);
      cpu_clock_ = this_thread_cpu_clock();
      known = true;
      cv.notify_one();
    });
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return known; });
  }
  ~asio_server() override {
    guard_.reset();
    context_.stop();
    thread_.join();
  }
  std::uint64_t invoke(std::uint64_t x) override {
    baseline_call call;
    call.in = x;
    boost::asio::post(context_, [this, &call] {
      std::lock_guard lock(mutex_);
      call.out = call.in + 1;
      call.done = true;
      call.cv.notify_one();
    });
    std::unique_lock lock(mutex_);
    call.cv.wait(lock, [&] { return call.done; });
    return call.out;
  }
  void post(std::atomic<std::uint64_t>& executed) override {
    boost::asio::post(context_, [&executed] { executed.fetch_add(1, std::memory_order_release); });
  }
  void pin(int cpu) override {
    boost::asio::post(context_, [cpu] { pin_current_thread(cpu); });
  }

 private:
  boost::asio::io_context context_{1};  // one thread runs it: asio may skip some locking
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::mutex mutex_;  // the callers' completions
  pal::managed_thread thread_;
};

// --- Calling threads ----------------------------------------------------------------------

// `count` threads that run one function together, once per run(), and stay for the next: a
// slice starts by waking them rather than by starting threads. Coordination allocates nothing.
class caller_team {
 public:
  caller_team(int count, const std::vector<int>& cpus) : count_(count) {
    for (int i = 0; i < count; ++i) {
      const std::optional<int> cpu =
          cpus.empty() ? std::nullopt : std::optional<int>(cpus[static_cast<std::size_t>(i) % cpus.size()]);
      threads_.push_back(pal::start_thread({"bench-caller-" + std::to_string(i)}, [this, i, cpu] {
        if (cpu) pin_current_thread(*cpu);
        serve(i);
      }));
    }
  }
  ~caller_team() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }
  caller_team(const caller_team&) = delete;
  caller_team& operator=(const caller_team&) = delete;

  // Runs fn(caller index) on every thread at once; returns when all have returned.
  void run(const std::function<void(int)>& fn) {
    std::unique_lock lock(mutex_);
    fn_ = &fn;
    running_ = count_;
    ++generation_;
    start_.notify_all();
    finished_.wait(lock, [&] { return running_ == 0; });
    fn_ = nullptr;
  }

 private:
  void serve(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* fn;
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        fn = fn_;
      }
      (*fn)(index);
      std::lock_guard lock(mutex_);
      if (--running_ == 0) finished_.notify_one();
    }
  }

  const int count_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(int)>* fn_ = nullptr;
  std::uint64_t generation_ = 0;
  int running_ = 0;
  bool quit_ = false;
  std::vector<pal::managed_thread> threads_;
};

// --- Measurement --------------------------------------------------------------------------

struct contender {
  std::string name;
  // This repetition: each caller's latencies (invoke), calls, allocations, time.
  std::vector<std::vector<std::uint32_t>> latencies;
  // post: per caller, each on a pair of cache lines of its own (the server writes it for
  // every item, its caller reads it): beside anything else, its line's traffic would be
  // charged to whatever shares it, differently from run to run as the heap falls.
  struct alignas(128) counter {
    std::atomic<std::uint64_t> value{0};
  };
  std::vector<counter> executed;
  std::unique_ptr<server> srv;  // last: destroyed (its thread joined) before what it touches
  std::uint64_t ops = 0;
  std::uint64_t allocs = 0;
  std::int64_t elapsed_ns = 0;
  // invoke and post: the repetition's wall time and its CPU-timed twin (bench_timing.hpp's
  // timed_run), summed over the variant's slices: each slice's wall time against the CPU
  // time of the calling threads over their part of it and of the server thread over it, per
  // CPU they occupy (the server's and the callers'). What the rows' `disturbed` and post's
  // cpu_value come from. invoke/idle has none: its threads sleep by design (1 ms before each
  // call, the server parked), so neither clock comparison can tell others' disturbance from
  // the case's own idling.
  double clocked_wall_ns = 0;
  double clocked_cpu_ns = 0;
};

double percentile(std::vector<std::uint32_t>& v, double p) {
  if (v.empty()) return 0.0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Runs fn on every caller, as one slice of contender c, and returns the slice's wall time.
// Clocked (invoke, post): adds the slice to contender::clocked_*, with each caller's CPU time
// over its part, which fn wrote to callers_cpu[caller], and the server's, read around the
// slice; `cpus` = the CPUs the callers and the server occupy.
std::chrono::nanoseconds run_slice(contender& c, caller_team& team, const std::function<void(int)>& fn,
                                   const std::vector<std::chrono::nanoseconds>* callers_cpu, int cpus) {
  const std::int64_t server_before = callers_cpu ? c.srv->worker_cpu_ns() : 0;
  const auto start = bench_clock::now();
  team.run(fn);
  const std::chrono::nanoseconds wall = bench_clock::now() - start;
  if (!callers_cpu) return wall;
  auto cpu = static_cast<double>(c.srv->worker_cpu_ns() - server_before);
  for (const std::chrono::nanoseconds k : *callers_cpu) cpu += static_cast<double>(k.count());
  c.clocked_wall_ns += static_cast<double>(wall.count());
  c.clocked_cpu_ns += cpu / cpus;
  return wall;
}

// One slice of `budget` for one contender, on every caller. Idle (invoke/idle): each caller
// makes idle_calls_per_slice calls instead, each after sleeping idle_gap. `cpus`: the CPUs the
// callers and the server occupy, for the slice's CPU-timed twin (not idle's: run_slice).
void invoke_slice(contender& c, caller_team& team, std::chrono::nanoseconds budget, bool record, int cpus,
                  bool idle = false) {
  std::atomic<std::uint64_t> ops{0};
  std::vector<std::chrono::nanoseconds> callers_cpu(c.latencies.size());  // before allocs_before: not counted
  const std::function<void(int)> fn = [&](int caller) {
    const stopwatch timer;
    auto& lat = c.latencies[static_cast<std::size_t>(caller)];
    std::uint64_t n = 0, x = 0;
    const auto keep = [&](std::int64_t t0, std::int64_t t1) {
      if (record && lat.size() < lat.capacity())
        lat.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(t1 - t0, UINT32_MAX)));
    };
    if (idle) {
      for (; n < idle_calls_per_slice; ++n) {
        std::this_thread::sleep_for(idle_gap);
        const std::int64_t t0 = now_ns();
        x = c.srv->invoke(x);
        keep(t0, now_ns());
      }
    } else {
      const std::int64_t end = now_ns() + budget.count();
      for (std::int64_t t0 = now_ns(); t0 < end; ++n) {
        x = c.srv->invoke(x);
        const std::int64_t t1 = now_ns();
        keep(t0, t1);
        t0 = t1;
      }
    }
    callers_cpu[static_cast<std::size_t>(caller)] = timer.stop(n).cpu;
    ops.fetch_add(n, std::memory_order_relaxed);  // relaxed: read after run() returns
  };
  const std::uint64_t allocs_before = heap_allocations();
  (void)run_slice(c, team, fn, record && !idle ? &callers_cpu : nullptr, cpus);
  if (record) {
    c.allocs += heap_allocations() - allocs_before;
    c.ops += ops.load(std::memory_order_relaxed);
  }
}

void post_slice(contender& c, caller_team& team, std::chrono::nanoseconds budget, bool record, int cpus) {
  std::atomic<std::uint64_t> posted_total{0};
  std::vector<std::chrono::nanoseconds> callers_cpu(c.executed.size());  // before allocs_before: not counted
  const std::function<void(int)> fn = [&](int caller) {
    const stopwatch timer;
    std::atomic<std::uint64_t>& executed = c.executed[static_cast<std::size_t>(caller)].value;
    // relaxed here and in the flow control: counts only; the drain below acquires.
    const std::uint64_t base = executed.load(std::memory_order_relaxed);
    std::uint64_t posted = 0;
    // What the caller last read of `executed`: the flow control reads the counter again only
    // when that says the limit is reached, not before every post, so that the line the server
    // writes for every item is not pulled to the caller's CPU for every item as well.
    std::uint64_t seen_executed = base;
    const std::int64_t end = now_ns() + budget.count();
    while (now_ns() < end) {
      for (int i = 0; i < 16; ++i) {
        while (posted - (seen_executed - base) >= max_outstanding_posts) {
          seen_executed = executed.load(std::memory_order_relaxed);
          if (posted - (seen_executed - base) >= max_outstanding_posts) sched_yield();
        }
        c.srv->post(executed);
        ++posted;
      }
    }
    // The drain counts. acquire: pairs with the items' release increments.
    while (executed.load(std::memory_order_acquire) - base < posted) sched_yield();
    callers_cpu[static_cast<std::size_t>(caller)] = timer.stop(posted).cpu;
    posted_total.fetch_add(posted, std::memory_order_relaxed);  // relaxed: read after run() returns
  };
  const std::uint64_t allocs_before = heap_allocations();
  const std::chrono::nanoseconds wall = run_slice(c, team, fn, record ? &callers_cpu : nullptr, cpus);
  if (record) {
    c.allocs += heap_allocations() - allocs_before;
    c.ops += posted_total.load(std::memory_order_relaxed);
    c.elapsed_ns += wall.count();
  }
}

std::string format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

void measure_queue_cases(const bench_settings& settings, bench_report& report, int callers, const cpu_plan& plan) {
  std::vector<contender> contenders(3);
  contenders[0].name = std::string(palrt_variant);
  contenders[0].srv = std::make_unique<palrt_server>();
  contenders[1].name = "condvar";
  contenders[1].srv = std::make_unique<condvar_server>();
  contenders[2].name = "asio";
  contenders[2].srv = std::make_unique<asio_server>();
  // Servers on one CPU, callers on the others (all CPUs when there is only one).
  std::vector<int> caller_cpus = plan.measuring_cpu ? std::vector<int>{*plan.measuring_cpu} : std::vector<int>{};
  if (!plan.load_cpus.empty()) {
    for (auto& c : contenders) c.srv->pin(plan.load_cpus.front());
    for (std::size_t i = 1; i < plan.load_cpus.size(); ++i) caller_cpus.push_back(plan.load_cpus[i]);
  }
  for (auto& c : contenders) {
    c.latencies.resize(static_cast<std::size_t>(callers));
    for (auto& l : c.latencies) l.reserve(max_recorded_per_caller);
    c.executed = std::vector<contender::counter>(static_cast<std::size_t>(callers));
  }
  caller_team team(callers, caller_cpus);
  // The CPUs the callers and the server occupy: the CPU-timed twin's denominator. Pinning is
  // best effort here, without a count of its successes, so this is the plan's.
  std::vector<int> occupied;
  for (int i = 0; i < callers && !caller_cpus.empty(); ++i)
    occupied.push_back(caller_cpus[static_cast<std::size_t>(i) % caller_cpus.size()]);
  if (!plan.load_cpus.empty()) occupied.push_back(plan.load_cpus.front());
  const int cpus = cpus_occupied(occupied, true, static_cast<int>(plan.load_cpus.size()) + 1);
  // The line-transfer probe's two CPUs: the first caller's and the server's (none: not pinned).
  const std::vector<int> transfer_cpus = !caller_cpus.empty() && !plan.load_cpus.empty()
                                             ? std::vector<int>{caller_cpus.front(), plan.load_cpus.front()}
                                             : std::vector<int>{};

  const std::chrono::nanoseconds budget = settings.run_budget();
  const std::int64_t slices = std::max<std::int64_t>(1, budget / interleave_slice);
  std::minstd_rand shuffler(0x51c);
  std::vector<std::size_t> order{0, 1, 2};

  enum class queue_case { invoke, post, idle };
  for (const queue_case qc : {queue_case::invoke, queue_case::post, queue_case::idle}) {
    const bool is_invoke = qc != queue_case::post;
    const char* case_name = qc == queue_case::invoke ? "invoke" : qc == queue_case::post ? "post" : "invoke/idle";
    // Idle slices take idle_calls_per_slice sleeps of idle_gap each, whatever the budget.
    const std::int64_t case_slices =
        qc == queue_case::idle
            ? std::max<std::int64_t>(1, budget / (3 * idle_calls_per_slice * std::chrono::nanoseconds(idle_gap)))
            : slices;
    report.progress(std::string(case_name) + " with " + std::to_string(callers) + " calling thread" +
                    (callers == 1 ? "" : "s") + ": 3 variants x " + std::to_string(settings.repetitions()) +
                    " repetitions");
    // Warm-up, discarded: pools and queues grow to their steady size, code and data get hot.
    for (auto& c : contenders) {
      if (is_invoke) {
        invoke_slice(c, team, budget / 10, false, cpus, qc == queue_case::idle);
      } else {
        post_slice(c, team, budget / 10, false, cpus);
      }
    }
    // post: the machine's cache-line transfer time between the callers' CPU and the server's,
    // just before the case and just after it (bench_line_transfer.hpp): each posted item
    // crosses between those two CPUs, and what that costs is the hypervisor's to choose.
    if (qc == queue_case::post) report_line_transfer(report, settings, transfer_cpus, "before_post_ns", callers);
    std::vector<std::vector<double>> p50(3), p99(3), allocs(3), rate(3), worker_cpu(3);
    // Per repetition, the time per op by the wall clock and by the threads' CPU clocks
    // (contender::clocked_*): the latencies' verdict; and post's rate by the CPU clocks.
    std::vector<std::vector<double>> clocked_wall(3), clocked_cpu(3), cpu_rate(3);
    std::vector<std::int64_t> cpu_before(3);
    for (int rep = 0; rep < settings.repetitions(); ++rep) {
      for (auto& c : contenders) {
        for (auto& l : c.latencies) l.clear();
        c.ops = c.allocs = 0;
        c.elapsed_ns = 0;
        c.clocked_wall_ns = c.clocked_cpu_ns = 0;
      }
      // Over the whole repetition, the other variants' slices included: a server that spins
      // on after its own slice pays for it here.
      for (std::size_t i = 0; i < contenders.size(); ++i) cpu_before[i] = contenders[i].srv->worker_cpu_ns();
      for (std::int64_t s = 0; s < case_slices; ++s) {
        std::shuffle(order.begin(), order.end(), shuffler);
        for (const std::size_t i : order) {
          if (is_invoke) {
            invoke_slice(contenders[i], team, interleave_slice, true, cpus, qc == queue_case::idle);
          } else {
            post_slice(contenders[i], team, interleave_slice, true, cpus);
          }
        }
      }
      for (std::size_t i = 0; i < contenders.size(); ++i) {
        contender& c = contenders[i];
        const std::int64_t cpu = c.srv->worker_cpu_ns() - cpu_before[i];
        worker_cpu[i].push_back(c.ops ? static_cast<double>(cpu) / static_cast<double>(c.ops) : 0.0);
        allocs[i].push_back(c.ops ? static_cast<double>(c.allocs) / static_cast<double>(c.ops) : 0.0);
        const double ops = static_cast<double>(c.ops);
        clocked_wall[i].push_back(c.ops ? c.clocked_wall_ns / ops : 0.0);
        clocked_cpu[i].push_back(c.ops ? c.clocked_cpu_ns / ops : 0.0);
        if (is_invoke) {
          std::vector<std::uint32_t> all;
          for (auto& l : c.latencies) {
            all.insert(all.end(), l.begin(), l.end());  // after the slices: not counted
            l.clear();
          }
          p50[i].push_back(percentile(all, 0.50));
          p99[i].push_back(percentile(all, 0.99));
        } else {
          rate[i].push_back(c.elapsed_ns ? ops * 1e9 / static_cast<double>(c.elapsed_ns) : 0.0);
          cpu_rate[i].push_back(c.clocked_cpu_ns > 0 ? ops * 1e9 / c.clocked_cpu_ns : 0.0);
        }
      }
    }
    if (qc == queue_case::post) report_line_transfer(report, settings, transfer_cpus, "after_post_ns", callers);
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      const std::string& v = contenders[i].name;
      const double wall_per_op = median(clocked_wall[i]), cpu_per_op = median(clocked_cpu[i]);
      if (is_invoke) {
        // A percentile has no CPU-timed twin; it takes its run's verdict (not invoke/idle's).
        const std::optional<bool> disturbed =
            qc == queue_case::idle ? std::nullopt : std::optional<bool>(is_disturbed(wall_per_op, cpu_per_op));
        report.add({case_name, v, callers, "p50_ns", median(p50[i]), std::nullopt, disturbed});
        report.add({case_name, v, callers, "p99_ns", median(p99[i]), std::nullopt, disturbed});
        report.progress(
            "  " + v + ": p50 " + format(median(p50[i])) + " ns (repetitions " + format(spread_of(p50[i]).min) +
            " .. " + format(spread_of(p50[i]).max) + "), p99 " + format(median(p99[i])) + " ns, worker CPU " +
            format(median(worker_cpu[i])) + " ns/op" +
            (disturbed ? "; " + format(wall_per_op) + " ns of slice per call" + cpu_clock_note(wall_per_op, cpu_per_op)
                       : std::string()));
      } else {
        const double cpu = median(cpu_rate[i]);
        report.add({case_name, v, callers, "ops_per_s", median(rate[i]), cpu});
        report.progress("  " + v + ": " + format(median(rate[i])) + " ops/s, worker CPU " +
                        format(median(worker_cpu[i])) + " ns/op" + cpu_clock_note(median(rate[i]), cpu));
      }
      report.add({case_name, v, callers, "worker_cpu_ns_per_op", median(worker_cpu[i])});
      if (qc != queue_case::idle) report.add({case_name, v, callers, "allocs_per_op", median(allocs[i])});
    }
  }
}

void measure_wait_any(const bench_settings& settings, bench_report& report, const cpu_plan& plan) {
  constexpr std::size_t events_count = 64;
  std::vector<sync::event_handle> events;
  for (std::size_t i = 0; i < events_count; ++i) events.emplace_back(sync::event_reset::automatic);
  const std::vector<sync::handle> objects(events.begin(), events.end());
  std::atomic<std::int64_t> stamp{0};
  std::atomic<bool> stop{false};
  pal::wake_event ack;
  std::vector<std::uint32_t> latencies;
  latencies.reserve(max_recorded_per_caller);
  std::atomic<bool> record{false};
  std::optional<int> waiter_cpu = plan.load_cpus.empty() ? std::nullopt : std::optional<int>(plan.load_cpus.front());
  pal::managed_thread waiter = pal::start_thread({"bench-waitany"}, [&] {
    if (waiter_cpu) pin_current_thread(*waiter_cpu);
    for (;;) {
      const sync::wait_result r = sync::wait_any(objects);
      const std::int64_t t1 = now_ns();
      // acquire: the setter's stamp and stop flag, stored before its set().
      if (stop.load(std::memory_order_acquire)) return;
      // relaxed: `record` and `stamp` were stored before the set() that woke us, which
      // publishes them (the objects' lock and the wait word's release/acquire).
      if (record.load(std::memory_order_relaxed) && latencies.size() < latencies.capacity())
        latencies.push_back(
            static_cast<std::uint32_t>(std::min<std::int64_t>(t1 - stamp.load(std::memory_order_relaxed), UINT32_MAX)));
      (void)r;
      ack.set();
    }
  });
  // The setter on the measuring CPU, the waiter on another: a cross-CPU wake-up every time,
  // as for invoke. Left to the scheduler, the two sometimes share a CPU and the wake-up is
  // ten times cheaper, which makes the median depend on placement, not on palrt.
  if (plan.measuring_cpu) pin_current_thread(*plan.measuring_cpu);
  report.progress("wait-any-64: palrt x " + std::to_string(settings.repetitions()) + " repetitions");
  std::vector<double> p50;
  std::size_t next = 0;
  const auto run_for_budget = [&](std::chrono::nanoseconds budget) {
    const std::int64_t end = now_ns() + budget.count();
    while (now_ns() < end) {
      next = (next + 17) % events_count;                 // a different event each time, all of them in turn
      stamp.store(now_ns(), std::memory_order_relaxed);  // relaxed: published by set()'s lock
      events[next].set();
      ack.wait();
    }
  };
  run_for_budget(settings.run_budget() / 10);     // warm-up
  record.store(true, std::memory_order_relaxed);  // relaxed: published by the next set()
  for (int rep = 0; rep < settings.repetitions(); ++rep) {
    run_for_budget(settings.run_budget());
    // The last ack came after the waiter's last record and before its next: the latencies
    // are ours until the next set().
    p50.push_back(percentile(latencies, 0.50));
    latencies.clear();
  }
  stop.store(true, std::memory_order_release);
  events[0].set();
  waiter.join();
  report.add({"wait-any-64", std::string(palrt_variant), 1, "p50_ns", median(p50)});
  report.progress("  palrt: p50 " + format(median(p50)) + " ns");
}

void run_invoke(const bench_settings& settings, bench_report& report) {
  const std::vector<int> thread_counts = settings.thread_counts({1});
  const cpu_plan plan = plan_cpus();
  affinity_guard restore_affinity;
  report.describe_case("invoke",
                       "a calling thread hands x -> x + 1 to the server thread and waits for the result; threads = "
                       "calling threads, one server thread per variant, pinned to a CPU of its own where there "
                       "are two or more. p50_ns / p99_ns: each call's round trip as its caller sees it, over all "
                       "calls of a repetition; allocs_per_op: heap allocations of the whole process (counting "
                       "operator new) / calls; worker_cpu_ns_per_op (invoke, post, invoke/idle): the server "
                       "thread's CPU time over a whole repetition, other variants' slices included (so a server "
                       "that spins on after its slice is charged for it), / its variant's calls. Variants "
                       "interleaved in shuffled 1 ms slices; median of " +
                           std::to_string(settings.repetitions()) +
                           " repetitions. disturbed (invoke, post): the slices' wall time against the CPU time of "
                           "the callers and the server in them, per CPU they occupy (post's ops_per_s also shows "
                           "that twin).");
  report.describe_case("post",
                       "calling threads queue ++counter to the server thread as fast as it runs them (at most " +
                           std::to_string(max_outstanding_posts) +
                           " outstanding per caller); ops_per_s: functions run / wall time including the final "
                           "drain; allocs_per_op as for invoke.");
  report.describe_case("line-transfer",
                       "not palrt's: the machine's. The one-way time of a cache line between the post callers' "
                       "CPU and the server's, just before the post case and just after it (two threads pinned "
                       "there hand a counter back and forth; the median of batches of 1000 round trips). Every "
                       "posted item crosses between those CPUs, and on a virtual machine the hypervisor's "
                       "placement of the two vCPUs sets what a crossing costs (docs/BENCHMARKS.md, \"post's "
                       "slow mode\"): read the post rows' worker_cpu_ns_per_op against it. threads: the post "
                       "case's callers. Only where the callers and the server are pinned to two different CPUs "
                       "(two or more allowed).");
  report.describe_case(
      "invoke/idle",
      "as invoke, but each caller sleeps 1 ms before each call (" + std::to_string(idle_calls_per_slice) +
          " calls per slice), so the server has been idle far longer than palrt's spin bound "
          "(sync_manager::max_spin, 100 us) and is parked: the round trip includes waking it. p50_ns / p99_ns as for "
          "invoke; no disturbed verdict, since the threads sleep by design.");
  report.describe_case("wait-any-64",
                       "palrt only: one thread blocked in wait_any over 64 auto-reset events, another, on "
                       "another CPU where there are two, sets one (a different one each time) and waits for an "
                       "acknowledgement; p50_ns from set() to wait_any's return; threads = 1 (one waiter) "
                       "whatever --threads says.");
  for (const int callers : thread_counts) measure_queue_cases(settings, report, callers, plan);
  measure_wait_any(settings, report, plan);
}

}  // namespace

bench_component invoke_component() {
  return {"invoke",
          "The sync manager's work queue: invoke round trip and post throughput beside a mutex+condvar queue "
          "and boost::asio, and wait_any's wake-up latency over 64 events",
          run_invoke};
}

}  // namespace palrt::bench

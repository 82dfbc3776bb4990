// SPDX-License-Identifier: MIT
// palrt-bench handles: the handle table's allocate/release beside its baselines.
//
// Case `alloc-release`, metric ns_per_op, one op = one allocate + release pair. Each thread
// works in bursts: it allocates a handle for each of the `burst` entries of its own working
// set, then releases them in the order it allocated them, and starts over; the loop, the
// working set and the order are the same for every variant, only the two calls differ:
//   palrt           handle_table::allocate(handle_kind::weak_short, target) and release()
//   mutex-freelist  a free list of preallocated slots behind one std::mutex: allocate pops
//                   under the lock and stores the target, release reads the target and pushes
//                   under the lock; no heap allocation in the steady state
//   new-delete      new of a slot-sized object (one pointer) holding the target, and delete
// `threads` counts the threads allocating and releasing, each in its own working set, all at
// once; ns_per_op = wall time of the slice / the pairs of all of them (so perfect scaling
// halves it).
//
// Two working sets, each with targets (issue 15's for the larger one):
//   alloc-release             burst 16: the steady state of a thread's handle cache, no lock
//                             taken and no shared line written. Targets: palrt <= 10 ns per
//                             pair on one thread; 2-thread aggregate >= 1.8x one thread (ns_per_op
//                             at 2 threads <= 1/1.8 of 1 thread); >= 3x the mutex free list at 2
//                             threads (palrt/mutex-freelist <= 0.33x).
//   alloc-release/burst=1024  larger than a thread's cache of 256 slots, so it goes through the
//                             table's slow paths: every 128 pairs a refill of 128 slots from the
//                             kind's depot of free-slot batches, or a return of 128 to it (a
//                             batch moves with one compare-exchange on the CPU's own shard of
//                             the depot, its container with another), and past glibc's
//                             per-thread malloc cache. Targets: palrt <= 10 ns per pair on one
//                             thread; 2-thread aggregate >= 1.6x one thread.
// The verdicts are printed under the table and on stderr.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <palrt/gc/handle_table.hpp>

#include "bench_component.hpp"
#include "bench_line_transfer.hpp"
#include "bench_report.hpp"
#include "bench_thread_team.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {

namespace {

constexpr const char* ns_per_op = "ns_per_op";
constexpr int target_burst = 16;
constexpr int large_burst = 1024;

// The object every handle refers to; the table never dereferences a target.
alignas(64) char some_object[64];

// Keeps the compiler from proving a value unused (GCC deletes a new/delete pair whose result
// nobody reads). Applied to every variant's results alike; no memory clobber, so it costs
// nothing beyond keeping the value in a register.
inline void escape(const void* p) noexcept { asm volatile("" : : "r"(p)); }

// --- the variants' slot pools, with one interface: allocate(target) -> slot, release(slot) ---

struct palrt_pool {
  using slot = palrt::gc::handle;
  palrt::gc::handle_table table;
  slot allocate(void* target) { return table.allocate(palrt::gc::handle_kind::weak_short, target); }
  void* release(slot h) noexcept { return table.release(h); }
  static const void* address(slot h) noexcept { return h.address(); }
};

// The lock-based design the handle table's per-thread caches replace, written the way one
// would write it for speed: slots preallocated in one array, the free ones chained through
// the slots themselves, one lock held for a pop or a push only.
class mutex_free_list {
 public:
  struct slot_t {
    void* value;  // the target while handed out; the next free slot while free
  };
  using slot = slot_t*;

  explicit mutex_free_list(std::size_t capacity) : slots_(capacity) {
    for (std::size_t i = 0; i + 1 < capacity; ++i) slots_[i].value = &slots_[i + 1];
    slots_[capacity - 1].value = nullptr;
    free_ = &slots_[0];
  }
  slot allocate(void* target) {
    slot s;
    {
      std::lock_guard lock(lock_);
      s = free_;
      if (!s) throw std::bad_alloc();
      free_ = static_cast<slot>(s->value);
    }
    s->value = target;
    return s;
  }
  void* release(slot s) noexcept {
    void* target = s->value;
    std::lock_guard lock(lock_);
    s->value = free_;
    free_ = s;
    return target;
  }
  static const void* address(slot s) noexcept { return s; }

 private:
  std::vector<slot_t> slots_;
  alignas(64) std::mutex lock_;
  slot free_ = nullptr;
};

struct new_delete_pool {
  struct slot_t {
    void* target;
  };
  using slot = slot_t*;
  slot allocate(void* target) { return new slot_t{target}; }
  void* release(slot s) noexcept {
    void* target = s->target;
    delete s;
    return target;
  }
  static const void* address(slot s) noexcept { return s; }
};

// One thread's working set, on cache lines of its own: a cache line of padding on each side,
// so no thread's stores land on a line another thread's working set uses.
template <class Slot>
struct working_set {
  static constexpr std::size_t pad = 64 / sizeof(Slot) + 1;
  explicit working_set(int burst) : storage(static_cast<std::size_t>(burst) + 2 * pad) {}
  Slot* held() noexcept { return storage.data() + pad; }
  std::vector<Slot> storage;
};

// A measured variant for `threads` threads: each slice, every member of the team runs its
// bursts for the slice's budget (through run_for, the loop every variant shares).
template <class Pool>
measured_variant team_variant(std::string name, std::shared_ptr<Pool> pool, std::shared_ptr<thread_team> team,
                              int burst) {
  using slot = typename Pool::slot;
  struct state {
    std::vector<std::unique_ptr<working_set<slot>>> sets;
    std::vector<member_run> runs;
  };
  auto s = std::make_shared<state>();
  for (int i = 0; i < team->size(); ++i) s->sets.push_back(std::make_unique<working_set<slot>>(burst));
  s->runs.resize(static_cast<std::size_t>(team->size()));
  return {std::move(name), [pool, team, s, burst](std::chrono::nanoseconds budget) {
            team->run([&](int member) {
              Pool& p = *pool;
              slot* held = s->sets[static_cast<std::size_t>(member)]->held();
              const auto start = bench_clock::now();
              timed_run t = run_for(budget, [&] {
                for (int i = 0; i < burst; ++i) {
                  held[i] = p.allocate(some_object);
                  escape(Pool::address(held[i]));
                }
                for (int i = 0; i < burst; ++i) escape(p.release(held[i]));
              });
              t.ops *= static_cast<std::uint64_t>(burst);  // run_for counted bursts
              s->runs[static_cast<std::size_t>(member)] = member_run::of(start, t);
            });
            return team_result(s->runs, team->cpus_used());
          }};
}

std::string format_ns(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string case_name(int burst) {
  return burst == target_burst ? std::string("alloc-release") : "alloc-release/burst=" + std::to_string(burst);
}

std::string describe(const bench_settings& settings, int burst) {
  const auto budget_ms = std::chrono::duration_cast<std::chrono::milliseconds>(settings.run_budget()).count();
  std::string d = "one op = one allocate + one release; each thread allocates " + std::to_string(burst) +
                  " handles (its working set), then releases them in allocation order, and repeats. "
                  "palrt = handle_table::allocate(weak_short, p) + release(); mutex-freelist = a std::mutex "
                  "around a preallocated intrusive free list (pop / push); new-delete = new/delete of a "
                  "one-pointer slot. threads = threads doing ops at once, each on its own CPU where "
                  "possible; ns_per_op = slice wall time (first thread's start to last thread's end) / "
                  "pairs of all threads, per 1 ms slice, the variants' slices interleaved in shuffled "
                  "order; median of the slices of each of " +
                  std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(budget_ms) +
                  " ms per variant, then median of the repetitions.";
  if (burst != target_burst)
    d += " A working set larger than a thread's handle cache (256): every 128 pairs a refill of 128 slots "
         "from the kind's depot of free-slot batches, or a return of 128 to it.";
  return d;
}

struct measured {
  int burst;
  int threads;
  std::string variant;
  double value;
  double cpu_value;  // the CPU-timed twin
};

const measured* find(const std::vector<measured>& all, int burst, int threads, std::string_view variant) {
  for (const auto& m : all) {
    if (m.burst == burst && m.threads == threads && m.variant == variant) return &m;
  }
  return nullptr;
}

// The targets of one case, each as one line: the numbers, the threshold, met or missed.
std::vector<std::string> verdicts(const std::vector<measured>& all, int burst) {
  std::vector<std::string> lines;
  char buf[256];
  const bool small = burst == target_burst;
  const double scaling_target = small ? 1.8 : 1.6;
  const measured* one = find(all, burst, 1, palrt_variant);
  const measured* two = find(all, burst, 2, palrt_variant);
  const measured* mutex_two = find(all, burst, 2, "mutex-freelist");
  if (one) {
    std::snprintf(buf, sizeof buf, "palrt at 1 thread %.2f ns per pair (target <= 10 ns): %s", one->value,
                  one->value <= 10.0 ? "met" : "MISSED");
    lines.emplace_back(buf);
  }
  if (one && two) {
    // By the wall clock, and by the threads' CPU clocks, which a run that others disturbed
    // leaves as they would have been (issue 27: the target is met by the CPU-timed figures in
    // every undisturbed run, and by the wall figures' medians).
    const double scaling = one->value / two->value;
    const double cpu_scaling = one->cpu_value / two->cpu_value;
    const bool disturbed = is_disturbed(one->value, one->cpu_value) || is_disturbed(two->value, two->cpu_value);
    std::snprintf(buf, sizeof buf,
                  "palrt 2-thread aggregate %.2fx one thread (target >= %.2fx): %s; by the threads' CPU clocks "
                  "%.2fx: %s%s",
                  scaling, scaling_target, scaling >= scaling_target ? "met" : "MISSED", cpu_scaling,
                  cpu_scaling >= scaling_target ? "met" : "MISSED", disturbed ? " (a disturbed run)" : "");
    lines.emplace_back(buf);
  }
  if (small && two && mutex_two) {
    const double speedup = mutex_two->value / two->value;
    std::snprintf(buf, sizeof buf, "palrt at 2 threads %.2fx faster than mutex-freelist (target >= 3.00x): %s", speedup,
                  speedup >= 3.0 ? "met" : "MISSED");
    lines.emplace_back(buf);
  }
  return lines;
}

void run_handles(const bench_settings& settings, bench_report& report) {
  const std::vector<int> thread_counts = settings.thread_counts({1, 2});
  const std::vector<int> cpus = team_cpus();
  std::vector<measured> all;

  // The machine's line transfer between the two threads' CPUs, around the 2-thread runs.
  const bool two_threads = std::find(thread_counts.begin(), thread_counts.end(), 2) != thread_counts.end();
  if (two_threads) {
    report.describe_case("line-transfer", line_transfer_description("alloc-release cases"));
    report_line_transfer(report, settings, cpus, "before_ns");
  }
  for (const int burst : {target_burst, large_burst}) {
    const std::string name = case_name(burst);
    report.describe_case(name, describe(settings, burst));
    for (const int threads : thread_counts) {
      // A fresh team, table and free list per thread count: members of the 1-thread run do not
      // wait beside it, and no variant inherits a warm state from another thread count.
      auto team = std::make_shared<thread_team>(threads, cpus, "bench-handles");
      const std::size_t capacity = static_cast<std::size_t>(threads) * static_cast<std::size_t>(burst) + 64;
      std::vector<measured_variant> variants;
      variants.push_back(team_variant(std::string(palrt_variant), std::make_shared<palrt_pool>(), team, burst));
      variants.push_back(team_variant("mutex-freelist", std::make_shared<mutex_free_list>(capacity), team, burst));
      variants.push_back(team_variant("new-delete", std::make_shared<new_delete_pool>(), team, burst));

      report.progress(name + " with " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") + " (" +
                      std::to_string(team->pinned()) + " of " + std::to_string(threads) +
                      " pinned): " + std::to_string(variants.size()) + " variants x " +
                      std::to_string(settings.repetitions()) + " repetitions");
      const auto samples = sample_ns_per_op_interleaved(variants, settings.repetitions(), settings.run_budget());
      for (std::size_t i = 0; i < variants.size(); ++i) {
        const sample_spread s = spread_of(samples[i].wall);
        const double cpu = median(samples[i].cpu);
        report.add({name, variants[i].name, threads, ns_per_op, s.median, cpu});
        all.push_back({burst, threads, variants[i].name, s.median, cpu});
        report.progress("  " + variants[i].name + ": " + format_ns(s.median) + " ns/op (repetitions " +
                        format_ns(s.min) + " .. " + format_ns(s.max) + ")" + cpu_clock_note(s.median, cpu));
      }
    }
  }

  if (two_threads) report_line_transfer(report, settings, cpus, "after_ns");

  for (const int burst : {target_burst, large_burst}) {
    std::string summary;
    for (const auto& line : verdicts(all, burst)) {
      report.progress("target (" + case_name(burst) + "): " + line);
      summary += (summary.empty() ? "" : "; ") + line;
    }
    if (!summary.empty()) report.describe_case("targets (" + case_name(burst) + ")", summary + ".");
  }
}

}  // namespace

bench_component handles_component() {
  return {"handles",
          "GC-handle table: allocate + release pairs beside a mutex-protected free list and new/delete, "
          "with 1 and 2 threads",
          run_handles};
}

}  // namespace palrt::bench

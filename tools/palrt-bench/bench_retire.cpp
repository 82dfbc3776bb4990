// SPDX-License-Identifier: MIT
// palrt-bench retire: palrt::gc::retire beside liburcu's call_rcu and a plain delete.
//
// One op, for every variant: allocate a 64-byte object (new), read a field of it as a reader
// would, then hand it back:
//   palrt     { gc::read_section s; read } then gc::retire(p, reclaim), whose reclaim deletes p
//             after a grace period (retire.hpp: per-thread batches of 64, one process-wide
//             barrier and the batch's reclaims per full batch, on the retiring thread)
//   call_rcu  liburcu's default flavour (memb, as palrt-bench cache's rculfhash peer):
//             rcu_read_lock(); read; rcu_read_unlock(); call_rcu(&p->head, reclaim). The
//             reclaims run on liburcu's call_rcu worker thread, which sleeps 10 ms after each
//             batch it takes (liburcu 0.13's call_rcu_thread: poll(NULL, 0, 10)), so that one
//             grace period serves 10 ms of callbacks.
//   delete    read, then delete at once: no grace period, so unsafe with concurrent readers;
//             the floor.
// Every reclaim (and delete's delete) also counts itself, in a counter of the thread it runs
// on, so the variants do the same work around the free and `lost` can be checked.
//
// Case `retire`, threads 1 and 2 (--threads N: N), threads = threads retiring at once, each on
// its own CPU where possible (liburcu's worker is not counted and is not pinned: it is started
// before any thread is pinned, and a thread inherits its creator's CPU mask). Each thread runs
// the op for the slice, then drains: palrt gc::drain_retired(), call_rcu rcu_barrier() (every
// reclaim of the slice has run when either returns; delete has nothing left). The drain is
// INSIDE the timed part, so the reclaims' cost is in the figure wherever they ran. Metrics:
//   ns_per_op      slice wall time (first thread's start to the last thread's drain's end) /
//                  ops of all threads. One slice per repetition (the whole budget), not 1 ms
//                  slices: a drain of call_rcu waits for the worker's 10 ms sleep, which in a
//                  1 ms slice would be timed ten times over; in a 200 ms slice it is at most
//                  ~5% (the sleep the drain meets, plus the last batch's frees, which are work).
//   cpu_ns_per_op  the process's CPU time (every thread: the retiring ones and liburcu's worker)
//                  over every run of the variant, warm-up included, / its ops: what the
//                  reclaims cost wherever they ran, idle time excluded (a mean, not a median).
//   lost           palrt and call_rcu: objects retired and never reclaimed by the end of the
//                  case (negative: reclaimed more often than retired). Must be 0.
// Case `retire/drain-untimed`: the same ops in the 1 ms slices every component uses
// (bench_timing.hpp), each slice still drained (so no variant's deferred reclaims land in
// another's slices), but the drain OUTSIDE the timed part: what the retiring threads pay
// while they retire. For call_rcu that leaves the frees out (its worker is asleep for most of
// a 1 ms slice); palrt's inline reclaims stay in, but for the slice's last partial batch.
// Metrics ns_per_op, lost.
//
// No target is set for this component: the ratios are printed without a verdict.
//
// _LGPL_SOURCE inlines liburcu's read-side fast paths (rcu_read_lock/unlock) into this file,
// as palrt's read_section is inlined into its callers (bench_cache_rculfhash.cpp says why
// that is allowed). call_rcu() and rcu_barrier() are out of line in liburcu either way.
#define _LGPL_SOURCE 1

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <urcu.h>

#include <palrt/gc/read_section.hpp>
#include <palrt/gc/retire.hpp>

#include "bench_component.hpp"
#include "bench_report.hpp"
#include "bench_thread_team.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {

namespace {

constexpr const char* drained_case = "retire";
constexpr const char* untimed_case = "retire/drain-untimed";
constexpr const char* ns_per_op = "ns_per_op";
constexpr const char* cpu_ns_per_op = "cpu_ns_per_op";
constexpr const char* lost_metric = "lost";
// Far beyond any drain of a healthy run (a few grace periods); a drain that takes longer is a
// failure of the run, not a figure.
constexpr auto drain_timeout = std::chrono::seconds(10);

// --- the object, and what a reader does with it ---

// The same type for every variant: call_rcu needs its link in the object, the others carry
// it unused, so all allocate and free the same size.
struct retired_object {
  rcu_head head;
  // A reader's load (atomic, so the compiler cannot take the value from the constructor's
  // store instead of reading the object).
  std::atomic<std::uint64_t> value{1};
  std::uint64_t payload[5];
};
static_assert(sizeof(retired_object) == 64, "the benchmark retires 64-byte objects");

// Keeps the compiler from proving an allocation unused (GCC deletes a new/delete pair whose
// pointer never escapes). Applied to every variant alike.
inline void escape(const void* p) noexcept { asm volatile("" : : "r"(p)); }

// A reader's use of the object: one load of a field into a register (no memory clobber).
inline void read_as_a_reader(const retired_object* o) noexcept {
  // relaxed: only this thread wrote it; the load has to happen, not to order anything.
  const std::uint64_t v = o->value.load(std::memory_order_relaxed);
  asm volatile("" : : "r"(v));
}

// --- counting reclaims where they run ---

enum variant_index : std::size_t { palrt_index, call_rcu_index, delete_index, variant_count };

// One per thread that runs reclaims, on a line of its own: a counter shared by every thread
// would put a contended read-modify-write into each reclaim and move the ratios.
struct alignas(64) reclaim_tally {
  std::array<std::atomic<std::uint64_t>, variant_count> reclaimed{};
};
// Every thread that may run a reclaim: the team's members (--threads <= 256), the tool's
// main thread (member 0) and liburcu's worker. A thread beyond them counts in the overflow
// tally, with an atomic add.
constexpr std::size_t tally_slots = 260;
reclaim_tally tallies[tally_slots];
reclaim_tally overflow_tally;
std::atomic<std::size_t> tallies_taken{0};
constinit thread_local reclaim_tally* this_thread_tally = nullptr;

void count_reclaim(variant_index v) noexcept {
  reclaim_tally* t = this_thread_tally;
  if (!t) [[unlikely]] {
    // relaxed: the index only has to be unique; the slot's counters start at 0 and are summed
    // after the thread's reclaims are ordered before the sum (see reclaimed_so_far()).
    const std::size_t i = tallies_taken.fetch_add(1, std::memory_order_relaxed);
    t = this_thread_tally = i < tally_slots ? &tallies[i] : &overflow_tally;
  }
  if (t == &overflow_tally) [[unlikely]] {
    t->reclaimed[v].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // A load and a store, no read-modify-write: only this thread writes its tally. relaxed: the
  // sum reads it after the reclaim is ordered before it (below).
  t->reclaimed[v].store(t->reclaimed[v].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Every reclaim of variant v so far. Called between runs, when every reclaim of the last run
// has completed and is ordered before this call: a member's reclaims by thread_team::run()'s
// hand-back (release/acquire), the worker's by rcu_barrier(), whose completion count is a
// full-barrier read-modify-write that the waiting member reads before it returns (and then
// hands back to run()). So relaxed loads see them all.
std::uint64_t reclaimed_so_far(variant_index v) noexcept {
  const std::size_t used = std::min(tallies_taken.load(std::memory_order_relaxed), tally_slots);
  std::uint64_t sum = overflow_tally.reclaimed[v].load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < used; ++i) sum += tallies[i].reclaimed[v].load(std::memory_order_relaxed);
  return sum;
}

// --- the three variants' operations ---

void palrt_reclaim(void* p) noexcept {
  delete static_cast<retired_object*>(p);
  count_reclaim(palrt_index);
}

void call_rcu_reclaim(rcu_head* head) {
  delete caa_container_of(head, retired_object, head);
  count_reclaim(call_rcu_index);
}

// The measured operations allocate with a bare new on purpose: the op is "allocate, read,
// give back", and each variant frees with its own mechanism (a reclaim, a callback, delete).
void palrt_op() {
  auto* o = new retired_object;
  escape(o);
  {
    gc::read_section section;
    read_as_a_reader(o);
  }
  gc::retire(o, palrt_reclaim);
}

void call_rcu_op() {
  auto* o = new retired_object;
  escape(o);
  rcu_read_lock();
  read_as_a_reader(o);
  rcu_read_unlock();
  call_rcu(&o->head, call_rcu_reclaim);
}

void delete_op() {
  auto* o = new retired_object;
  escape(o);
  read_as_a_reader(o);
  delete o;
  count_reclaim(delete_index);
}

void palrt_drain() {
  if (!gc::drain_retired(drain_timeout))
    throw std::runtime_error("palrt: gc::drain_retired() did not finish within 10 s");
}
void call_rcu_drain() { rcu_barrier(); }
void delete_drain() {}

// What a variant did over one case: for lost and cpu_ns_per_op.
struct variant_totals {
  std::uint64_t ops = 0;    // every op of every run, warm-up included
  std::int64_t cpu_ns = 0;  // the process's CPU time over those runs (drained case only)
  bool cpu_known = true;    // std::clock() worked around every run
};

// The process's CPU time so far, every thread's (glibc's clock() is CLOCK_PROCESS_CPUTIME_ID,
// in microseconds); -1 if unavailable.
std::int64_t process_cpu_ns() noexcept {
  const std::clock_t c = std::clock();
  if (c == static_cast<std::clock_t>(-1)) return -1;
  return static_cast<std::int64_t>(static_cast<double>(c) * (1e9 / CLOCKS_PER_SEC));
}

enum class drain_timing { timed, untimed };

// Every variant runs through this: each member runs `op` in run_for() for the budget (the op
// inlined into the same loop for every variant), then `drain`, timed or not.
template <class Op, class Drain>
measured_variant retire_variant(std::string name, std::shared_ptr<thread_team> team, drain_timing timing, Op op,
                                Drain drain, std::shared_ptr<variant_totals> totals) {
  auto runs = std::make_shared<std::vector<member_run>>(static_cast<std::size_t>(team->size()));
  return {std::move(name), [team, timing, op, drain, totals, runs](std::chrono::nanoseconds budget) {
            // Only the drained case reports CPU time; the clock is a system call, kept out of
            // the 1 ms slices' way.
            const bool timed = timing == drain_timing::timed;
            const std::int64_t cpu_before = timed ? process_cpu_ns() : 0;
            team->run([&](int member) {
              member_run& r = (*runs)[static_cast<std::size_t>(member)];
              const stopwatch timer;  // the drained case's region: the ops and the drain
              const timed_run t = run_for(budget, op);
              if (timed) {
                drain();
                r = member_run::of(timer.started(), timer.stop(t.ops));
              } else {
                r = member_run::of(timer.started(), t);
                drain();
              }
            });
            if (timed) {
              const std::int64_t cpu_after = process_cpu_ns();
              if (cpu_before < 0 || cpu_after < 0) totals->cpu_known = false;
              totals->cpu_ns += cpu_after - cpu_before;
            }
            for (const member_run& r : *runs) totals->ops += r.ops;
            return team_result(*runs, team->cpus_used());
          }};
}

// --- liburcu's side: the worker and the threads' registration ---

// Starts liburcu's default call_rcu worker now (call_rcu() would start it on its first call,
// inside a timed run), while no thread of the tool is pinned: the worker inherits its
// creator's CPU mask and would otherwise share member 0's CPU for good.
void start_call_rcu_worker() { (void)get_default_call_rcu_data(); }

// Registers every member of the team with liburcu (call_rcu() and rcu_read_lock() need a
// registered thread) for the life of this object, outside any timed part, and unregisters
// them before the team's threads exit, as liburcu requires. The palrt and delete variants run
// on registered threads too: a registered thread outside a read-side section holds up no
// grace period.
class urcu_team_registration {
 public:
  explicit urcu_team_registration(thread_team& team) : team_(team) {
    team_.run([](int) { rcu_register_thread(); });
  }
  ~urcu_team_registration() {
    try {
      team_.run([](int) { rcu_unregister_thread(); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "palrt-bench retire: while unregistering from liburcu: %s\n", e.what());
    }
  }
  urcu_team_registration(const urcu_team_registration&) = delete;
  urcu_team_registration& operator=(const urcu_team_registration&) = delete;

 private:
  thread_team& team_;
};

// --- measuring and reporting ---

std::string format_ns(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

struct case_plan {
  const char* name;
  drain_timing timing;
  // Slices no shorter than this (bench_timing.hpp): the whole budget for the drained case.
  std::chrono::nanoseconds min_slice;
};

// One case at one thread count: every variant's median ns_per_op and, for the drained case,
// cpu_ns_per_op; lost for the deferring variants.
void measure_case(const case_plan& plan, int threads, const std::shared_ptr<thread_team>& team,
                  const bench_settings& settings, std::vector<bench_result>& out, bench_report& report) {
  struct contender {
    variant_index index;
    std::shared_ptr<variant_totals> totals = std::make_shared<variant_totals>();
    std::uint64_t reclaimed_before = 0;
  };
  std::vector<contender> contenders{{palrt_index}, {call_rcu_index}, {delete_index}};
  std::vector<measured_variant> variants;
  // Lambdas, not the functions' addresses: each variant's loop is its own instantiation, with
  // the op inlined (a pointer would make every op an indirect call).
  variants.push_back(retire_variant(
      std::string(palrt_variant), team, plan.timing, [] { palrt_op(); }, [] { palrt_drain(); }, contenders[0].totals));
  variants.push_back(retire_variant(
      "call_rcu", team, plan.timing, [] { call_rcu_op(); }, [] { call_rcu_drain(); }, contenders[1].totals));
  variants.push_back(retire_variant(
      "delete", team, plan.timing, [] { delete_op(); }, [] { delete_drain(); }, contenders[2].totals));
  for (auto& c : contenders) c.reclaimed_before = reclaimed_so_far(c.index);

  report.progress(std::string(plan.name) + " with " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") +
                  " (" + std::to_string(team->pinned()) + " of " + std::to_string(threads) +
                  " pinned): " + std::to_string(variants.size()) + " variants x " +
                  std::to_string(settings.repetitions()) + " repetitions");
  const auto samples =
      sample_ns_per_op_interleaved(variants, settings.repetitions(), settings.run_budget(), plan.min_slice);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const contender& c = contenders[i];
    const sample_spread s = spread_of(samples[i].wall);
    const double cpu = median(samples[i].cpu);
    out.push_back({plan.name, variants[i].name, threads, ns_per_op, s.median, cpu});
    std::string line = "  " + variants[i].name + ": " + format_ns(s.median) + " ns/op (repetitions " +
                       format_ns(s.min) + " .. " + format_ns(s.max) + ")" + cpu_clock_note(s.median, cpu);
    if (plan.timing == drain_timing::timed && c.totals->cpu_known && c.totals->ops > 0) {
      const double cpu = static_cast<double>(c.totals->cpu_ns) / static_cast<double>(c.totals->ops);
      out.push_back({plan.name, variants[i].name, threads, cpu_ns_per_op, cpu});
      line += ", " + format_ns(cpu) + " ns of CPU per op";
    }
    if (c.index != delete_index) {
      const std::uint64_t reclaimed = reclaimed_so_far(c.index) - c.reclaimed_before;
      const auto lost = static_cast<std::int64_t>(c.totals->ops - reclaimed);
      out.push_back({plan.name, variants[i].name, threads, lost_metric, static_cast<double>(lost)});
      line += "; " + std::to_string(c.totals->ops) + " retired, " + std::to_string(reclaimed) + " reclaimed, lost " +
              std::to_string(lost);
    }
    report.progress(line);
  }
}

const bench_result* find_result(const std::vector<bench_result>& results, const std::string& case_name,
                                const std::string& variant, int threads, const std::string& metric) {
  for (const auto& r : results) {
    if (r.case_name == case_name && r.variant == variant && r.threads == threads && r.metric == metric) return &r;
  }
  return nullptr;
}

// "retire ns_per_op: palrt/call_rcu 1t 0.52x 2t 0.61x, palrt/delete ..." for every case and
// time metric measured.
std::string ratio_summary(const std::vector<bench_result>& results, const std::vector<int>& thread_counts) {
  std::string summary;
  for (const char* case_name : {drained_case, untimed_case}) {
    for (const char* metric : {ns_per_op, cpu_ns_per_op}) {
      std::string part;
      for (const char* baseline : {"call_rcu", "delete"}) {
        std::string cells;
        for (const int t : thread_counts) {
          const bench_result* p = find_result(results, case_name, std::string(palrt_variant), t, metric);
          const bench_result* b = find_result(results, case_name, baseline, t, metric);
          if (!p || !b || b->value <= 0) continue;
          char buf[48];
          std::snprintf(buf, sizeof buf, " %dt %.2fx", t, p->value / b->value);
          cells += buf;
        }
        if (!cells.empty()) part += std::string(part.empty() ? "" : ",") + " palrt/" + baseline + cells;
      }
      if (!part.empty()) summary += std::string(summary.empty() ? "" : "; ") + case_name + " " + metric + ":" + part;
    }
  }
  return summary;
}

void run_retire(const bench_settings& settings, bench_report& report) {
  const std::vector<int> thread_counts = settings.thread_counts({1, 2});
  const auto budget_ms = std::chrono::duration_cast<std::chrono::milliseconds>(settings.run_budget()).count();
  const std::string reps =
      std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(budget_ms) + " ms per variant";
  const std::string op =
      "one op = new a 64-byte object, read a field of it as a reader would, give it back: palrt = { "
      "gc::read_section; read } then gc::retire(p, reclaim deleting p); call_rcu = rcu_read_lock(); read; "
      "rcu_read_unlock(); call_rcu(&p->head, callback deleting p) (liburcu's default memb flavour, its one "
      "call_rcu worker thread, not pinned); delete = read, then delete at once (no grace period: unsafe; the "
      "floor). Every reclaim counts itself in a counter of its thread. threads = threads retiring at once, each "
      "on its own CPU where possible, registered with liburcu outside the timed part (the worker is not "
      "counted). ";
  report.describe_case(
      drained_case,
      op +
          "Each thread drains after its ops INSIDE the timed part (palrt gc::drain_retired(), call_rcu "
          "rcu_barrier()), so every reclaim is paid for. ns_per_op = wall time from the first thread's start to "
          "the last thread's drain's end / ops of all threads, one run per variant per repetition (not 1 ms "
          "slices: a drain waits for liburcu's worker, which sleeps 10 ms after each batch; over a whole run "
          "that wait is a few %), variants in shuffled order; median of " +
          reps +
          ". cpu_ns_per_op = the process's CPU time (every thread, liburcu's worker included) over all of the "
          "variant's runs / their ops (a mean). lost = retired - reclaimed at the end of the case (must be 0).");
  report.describe_case(
      untimed_case,
      "the same ops in 1 ms slices, the variants' slices interleaved in shuffled order, each slice drained but "
      "the drain OUTSIDE the timed part: what the retiring threads pay while they retire (call_rcu's frees run "
      "later on its worker; palrt's run inline, but for each slice's last partial batch). ns_per_op = slice "
      "wall time / ops of all threads; median of the slices of each of " +
          reps + ", then median of the repetitions. lost as above.");

  start_call_rcu_worker();  // before any team pins a thread
  const case_plan plans[] = {{drained_case, drain_timing::timed, settings.run_budget()},
                             {untimed_case, drain_timing::untimed, interleave_slice}};
  std::vector<bench_result> results;
  for (const int threads : thread_counts) {
    auto team = std::make_shared<thread_team>(threads, team_cpus(), "bench-retire");
    urcu_team_registration registered(*team);
    for (const case_plan& plan : plans) measure_case(plan, threads, team, settings, results, report);
  }

  // Rows in the order a reader compares them: by case, then metric, then thread count.
  for (const char* case_name : {drained_case, untimed_case}) {
    for (const char* metric : {ns_per_op, cpu_ns_per_op, lost_metric}) {
      for (const int t : thread_counts) {
        for (const auto& r : results) {
          if (r.case_name == case_name && r.metric == metric && r.threads == t) report.add(r);
        }
      }
    }
  }
  if (const std::string summary = ratio_summary(results, thread_counts); !summary.empty()) {
    report.progress("ratios (no target): " + summary);
    report.describe_case("ratios (no target)", summary + ".");
  }
}

}  // namespace

bench_component retire_component() {
  return {"retire",
          "gc::retire (deferred reclamation after a grace period) beside liburcu's call_rcu and a plain delete, "
          "with 1 and 2 threads, the reclaims' drain timed and untimed",
          run_retire};
}

}  // namespace palrt::bench

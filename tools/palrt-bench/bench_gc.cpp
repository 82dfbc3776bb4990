// SPDX-License-Identifier: MIT
// palrt-bench gc: the handle table's walks as a production collector makes them
// (palrt/gc/handle_walk.hpp), each beside the walk it replaces, in one run.
//
// Cases (metric, and what each row compares):
//   young-sweep/100k-old    ns_per_collection. A young collection's weak sweep over a table of
//                           100,000 old weak handles (aged by a collection) and 1,000 young
//                           ones: `aged` walks the blocks of age 0 (handle_walk(t, weak_short,
//                           0)), `full` sweeps every slot (sweep_weak, today's walk); each then
//                           ages the blocks (age_handles(0, 1)), and before each collection the
//                           mutator stores into its 1,000 young handles again (untimed), so
//                           every collection finds them young. Target: aged <= 0.05x full.
//   parallel-sweep/1M       ns_per_op = ns per handle. One sweep of 1,000,000 weak handles
//                           (none dies; the liveness test reads a mark byte in each target),
//                           by 1 GC thread (pinned to each CPU in turn, palrt@cpuN, and their
//                           mean rate, palrt) or by 2 sharing one handle_walk. Target: 2 threads
//                           >= 1.8x faster than 1.
//   sweep-relocate/1M       ns_per_op = ns per handle. `sweep-relocate`: the single pass that
//                           clears the dead and relocates the rest, where every target moves
//                           (forward() reads the object's forwarding word: the worst case);
//                           `sweep`: a sweep alone over the same table, whose liveness test
//                           reads the same word. Target: sweep-relocate <= 1.2x sweep.
//   dependent-chain/4000    ns_per_op = ns per link. The promotion of a chain of 4,000
//                           dependent handles (link i: primary o[i], secondary o[i+1]; o[0] a
//                           root) by a collector with a mark stack: `walk-order` and
//                           `reverse-order` lay the links in and against the order the walks
//                           meet them, promoted by a dependent_promotion (one walk, then a
//                           lookup per marked object); `rounds-walk-order` and
//                           `rounds-reverse-order` promote the same chains with rounds of
//                           promote_dependents until one marks nothing (2 rounds, and 4,001).
//                           Target: reverse-order <= 2x walk-order.
// Each collection is timed alone (two clock reads around it, ~40 ns beside microseconds; its
// CPU-timed twin by the collecting threads' CPU clocks, read outside that wall time);
// variants alternate collection by collection in shuffled order, and a row is the median of
// the repetitions' medians.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <palrt/gc/dependent_promotion.hpp>
#include <palrt/gc/handle_table.hpp>
#include <palrt/gc/handle_walk.hpp>

#include "bench_affinity.hpp"
#include "bench_component.hpp"
#include "bench_report.hpp"
#include "bench_thread_team.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {

namespace {

using gc::handle;
using gc::handle_kind;
using gc::handle_table;
using gc::handle_walk;

// A heap object as the collector sees it: a header with a mark byte and a forwarding word,
// and a body. 32 bytes, so a million of them span 32 MB, as a real heap's would.
struct object {
  object* forward = nullptr;  // where it moved (sweep-relocate), or itself
  std::uint8_t marked = 1;
  char body[23] = {};
};
static_assert(sizeof(object) == 32);

struct variant_timing {
  std::string name;
  std::function<void()> prepare;  // untimed, before each collection
  // Timed: one collection, by both clocks (on_this_thread, or run_timed for a team): its wall
  // time and the CPU time of the threads that ran it per CPU they occupied.
  std::function<timed_run()> collect;
  std::vector<double> repetition_medians;      // ns per collection
  std::vector<double> cpu_repetition_medians;  // their twins
};

// A collection run on the calling thread, timed by a stopwatch (whose CPU clock reads stay out
// of the wall time: a young collection takes a few microseconds, two reads ~3 us).
template <class Collect>
std::function<timed_run()> on_this_thread(Collect collect) {
  return [collect]() mutable {
    const stopwatch timer;
    collect();
    return timer.stop(1);
  };
}

// Runs each variant's collection `per_repetition` times per repetition, alternating the
// variants in shuffled order collection by collection; each repetition's median per variant,
// by the wall clock and by the collecting threads' CPU clocks.
void measure(std::vector<variant_timing>& variants, int repetitions, int per_repetition) {
  std::minstd_rand shuffler(0x9c01);
  std::vector<std::size_t> order(variants.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (auto& v : variants) {  // warm-up: first touches
    v.prepare();
    v.collect();
  }
  for (int rep = 0; rep < repetitions; ++rep) {
    std::vector<std::vector<double>> ns(variants.size()), cpu_ns(variants.size());
    for (int c = 0; c < per_repetition; ++c) {
      std::shuffle(order.begin(), order.end(), shuffler);
      for (std::size_t i : order) {
        variants[i].prepare();
        const timed_run r = variants[i].collect();
        ns[i].push_back(static_cast<double>(r.elapsed.count()));
        cpu_ns[i].push_back(static_cast<double>(r.cpu.count()));
      }
    }
    for (std::size_t i = 0; i < variants.size(); ++i) {
      variants[i].repetition_medians.push_back(median(std::move(ns[i])));
      variants[i].cpu_repetition_medians.push_back(median(std::move(cpu_ns[i])));
    }
  }
}

std::string verdict(const char* what, double ratio, double target, bool at_most) {
  char buf[160];
  const bool met = at_most ? ratio <= target : ratio >= target;
  std::snprintf(buf, sizeof buf, "%s %.3fx (target %s %.2fx): %s", what, ratio, at_most ? "<=" : ">=", target,
                met ? "met" : "MISSED");
  return buf;
}

// A table of `n` weak_short handles, one per object of `heap`.
struct weak_table {
  handle_table table;
  std::vector<handle> handles;
  void fill(std::vector<object>& heap, std::size_t first, std::size_t n) {
    for (std::size_t i = first; i < first + n; ++i)
      handles.push_back(table.allocate(handle_kind::weak_short, &heap[i]));
  }
  ~weak_table() {
    for (handle h : handles) (void)table.release(h);
  }
};

bool is_marked(void* o) noexcept { return static_cast<object*>(o)->marked != 0; }

void young_sweep(const bench_settings& settings, bench_report& report) {
  const std::size_t old_n = settings.smoke ? 1000 : 100000;
  const std::size_t young_n = settings.smoke ? 10 : 1000;
  const std::string name = settings.smoke ? "young-sweep/1k-old" : "young-sweep/100k-old";
  std::vector<object> heap(old_n + young_n);
  weak_table t;
  t.fill(heap, 0, old_n);
  t.table.age_handles(0, 1);  // the 100,000 are old now
  t.fill(heap, old_n, young_n);
  auto store_young = [&] {
    for (std::size_t i = old_n; i < old_n + young_n; ++i) handle_table::set_target(t.handles[i], &heap[i]);
  };
  auto alive = [](void* o) { return is_marked(o); };
  std::size_t cleared = 0;
  std::vector<variant_timing> variants;
  variants.push_back({"aged",
                      store_young,
                      on_this_thread([&] {
                        handle_walk walk(t.table, handle_kind::weak_short, 0);
                        cleared += walk.sweep(alive);
                        t.table.age_handles(0, 1);
                      }),
                      {},
                      {}});
  variants.push_back({"full",
                      store_young,
                      on_this_thread([&] {
                        cleared += t.table.sweep_weak(handle_kind::weak_short, alive);
                        t.table.age_handles(0, 1);
                      }),
                      {},
                      {}});
  report.progress(name + ": aged and full young collections");
  measure(variants, settings.repetitions(), settings.smoke ? 3 : settings.quick ? 50 : 200);
  if (cleared != 0) throw std::runtime_error("gc young-sweep: a sweep cleared a live handle");
  report.describe_case(name, "ns_per_collection of a young collection's weak sweep (and its age_handles) over " +
                                 std::to_string(old_n) + " old and " + std::to_string(young_n) +
                                 " young weak handles: aged = handle_walk of the blocks of age 0, full = "
                                 "sweep_weak over every slot; threads = GC threads.");
  const double aged = median(variants[0].repetition_medians), full = median(variants[1].repetition_medians);
  report.add({name, "aged", 1, "ns_per_collection", aged, median(variants[0].cpu_repetition_medians)});
  report.add({name, "full", 1, "ns_per_collection", full, median(variants[1].cpu_repetition_medians)});
  const std::string v = verdict("aged/full", aged / full, 0.05, true);
  report.progress("target (" + name + "): " + v);
  report.describe_case("targets (" + name + ")", v + ".");
}

void parallel_sweep(const bench_settings& settings, bench_report& report) {
  const std::size_t n = settings.smoke ? 10000 : 1000000;
  const std::string name = settings.smoke ? "parallel-sweep/10k" : "parallel-sweep/1M";
  std::vector<object> heap(n);
  weak_table t;
  t.fill(heap, 0, n);
  const std::vector<int> cpus = team_cpus();
  const std::vector<int> thread_counts = settings.thread_counts({1, 2});
  std::atomic<std::size_t> cleared{0};
  auto sweep = [&](handle_walk& walk) {
    cleared.fetch_add(walk.sweep([](void* o) { return is_marked(o); }), std::memory_order_relaxed);
  };
  // One GC thread is measured on each CPU the team uses, in turn: the vCPUs of these
  // machines differ in speed (a sweep of 1M handles took 5.1 ns per handle on one and 7.4 on
  // the other, minutes apart, while two threads sharing it took 3.1, the sum of the two
  // rates), so one thread on whichever CPU the tool started on is no baseline. The 1-thread
  // row is one thread's mean rate over the CPUs (the harmonic mean of their medians: perfect
  // scaling on N CPUs is N times it); each CPU's median is a row of its own (palrt@cpuN).
  affinity_guard restore_affinity;
  std::vector<int> single_cpus = cpus.empty() ? std::vector<int>{-1} : cpus;
  if (single_cpus.size() > 2) single_cpus.resize(2);
  std::unique_ptr<thread_team> team;
  std::vector<variant_timing> variants;
  std::vector<int> variant_threads;
  for (int threads : thread_counts) {
    if (threads == 1) {
      for (int cpu : single_cpus) {
        variants.push_back({cpu < 0 ? std::string(palrt_variant) : "palrt@cpu" + std::to_string(cpu),
                            [cpu] {
                              if (cpu >= 0) pin_current_thread(cpu);
                            },
                            on_this_thread([&] {
                              handle_walk walk(t.table, handle_kind::weak_short);
                              sweep(walk);
                            }),
                            {},
                            {}});
        variant_threads.push_back(1);
      }
    } else {
      team = std::make_unique<thread_team>(threads, cpus, "bench-gc");
      const int home = cpus.empty() ? -1 : cpus.front();
      variants.push_back({std::string(palrt_variant),
                          [home] {
                            if (home >= 0) pin_current_thread(home);
                          },
                          [&] {
                            // The wall time from before the walk is made to the team's
                            // return, the members' CPU times from theirs (run_timed).
                            const auto start = bench_clock::now();
                            handle_walk walk(t.table, handle_kind::weak_short);
                            timed_run r = run_timed(*team, [&](int) { sweep(walk); });
                            r.elapsed = bench_clock::now() - start;
                            return r;
                          },
                          {},
                          {}});
      variant_threads.push_back(threads);
    }
  }
  report.progress(name + ": one sweep by 1 GC thread on each CPU in turn, and shared by 2");
  measure(variants, settings.repetitions(), settings.smoke ? 2 : settings.quick ? 5 : 15);
  if (cleared != 0) throw std::runtime_error("gc parallel-sweep: a sweep cleared a live handle");
  report.describe_case(name, "ns_per_op = ns per handle of one sweep of " + std::to_string(n) +
                                 " weak handles (none dies; is_alive reads a mark byte in the target); threads = "
                                 "GC threads sharing one handle_walk (each claims 32 blocks at a time). The 1-thread "
                                 "palrt row is the harmonic mean of the medians of one thread pinned to each CPU in "
                                 "turn (palrt@cpuN rows): the vCPUs differ in speed, and perfect 2-thread scaling is "
                                 "the sum of their rates.");
  double rates = 0, cpu_rates = 0, one = 0, two = 0;
  int singles = 0;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const double v = median(variants[i].repetition_medians) / static_cast<double>(n);
    const double cpu = median(variants[i].cpu_repetition_medians) / static_cast<double>(n);
    report.add({name, variants[i].name, variant_threads[i], "ns_per_op", v, cpu});
    if (variant_threads[i] == 1) {
      rates += 1.0 / v;
      cpu_rates += 1.0 / cpu;
      ++singles;
    } else if (variant_threads[i] == 2) {
      two = v;
    }
  }
  if (singles > 0) one = singles / rates;
  // The mean rate's twin is the mean of the twins' rates, as the rows it is made from.
  if (singles > 1) report.add({name, std::string(palrt_variant), 1, "ns_per_op", one, singles / cpu_rates});
  if (singles > 0 && two > 0) {
    const std::string v = verdict("2 threads faster than 1 by", one / two, 1.8, false);
    report.progress("target (" + name + "): " + v);
    report.describe_case("targets (" + name + ")", v + ".");
  }
}

void sweep_relocate(const bench_settings& settings, bench_report& report) {
  const std::size_t n = settings.smoke ? 10000 : 1000000;
  const std::string name = settings.smoke ? "sweep-relocate/10k" : "sweep-relocate/1M";
  // Two copies of each object, each forwarding to the other: every pass moves every target.
  std::vector<object> from(n), to(n);
  for (std::size_t i = 0; i < n; ++i) {
    from[i].forward = &to[i];
    to[i].forward = &from[i];
  }
  weak_table t;
  t.fill(from, 0, n);
  std::size_t cleared = 0;
  std::vector<variant_timing> variants;
  variants.push_back({"sweep-relocate",
                      [] {},
                      on_this_thread([&] {
                        handle_walk walk(t.table, handle_kind::weak_short);
                        cleared +=
                            walk.sweep_relocate([](void* o) -> void* { return static_cast<object*>(o)->forward; });
                      }),
                      {},
                      {}});
  variants.push_back({"sweep",
                      [] {},
                      on_this_thread([&] {
                        cleared += t.table.sweep_weak(handle_kind::weak_short, [](void* o) {
                          return static_cast<object*>(o)->forward != nullptr;
                        });
                      }),
                      {},
                      {}});
  report.progress(name + ": the single sweep-and-relocate pass and a sweep alone");
  measure(variants, settings.repetitions(), settings.smoke ? 2 : settings.quick ? 5 : 15);
  if (cleared != 0) throw std::runtime_error("gc sweep-relocate: a live handle was cleared");
  report.describe_case(name, "ns_per_op = ns per handle of one pass over " + std::to_string(n) +
                                 " weak handles: sweep-relocate = handle_walk::sweep_relocate, every target "
                                 "moving (forward() reads the object's forwarding word); sweep = sweep_weak whose "
                                 "test reads the same word; threads = GC threads.");
  const double both = median(variants[0].repetition_medians) / static_cast<double>(n);
  const double sweep_only = median(variants[1].repetition_medians) / static_cast<double>(n);
  report.add({name, "sweep-relocate", 1, "ns_per_op", both,
              median(variants[0].cpu_repetition_medians) / static_cast<double>(n)});
  report.add(
      {name, "sweep", 1, "ns_per_op", sweep_only, median(variants[1].cpu_repetition_medians) / static_cast<double>(n)});
  const std::string v = verdict("sweep-relocate/sweep", both / sweep_only, 1.2, true);
  report.progress("target (" + name + "): " + v);
  report.describe_case("targets (" + name + ")", v + ".");
}

// A chain of dependent handles over objects whose mark byte is the collector's, laid so that
// the walks meet its links in order or against it.
struct dependent_chain {
  handle_table table;
  std::vector<object> objects;
  std::vector<handle> handles;
  dependent_chain(std::size_t n, bool reverse) : objects(n + 1) {
    for (std::size_t i = 0; i < n; ++i) handles.push_back(table.allocate(handle_kind::dependent, nullptr));
    std::vector<handle> order;
    table.for_each_slot(handle_kind::dependent, [&](gc::handle_slot s) { order.push_back(s.as_handle()); });
    if (reverse) std::reverse(order.begin(), order.end());
    for (std::size_t i = 0; i < n; ++i) {
      handle_table::set_target(order[i], &objects[i]);
      table.set_secondary(order[i], &objects[i + 1]);
    }
  }
  ~dependent_chain() {
    for (handle h : handles) (void)table.release(h);
  }
  void unmark() {
    for (auto& o : objects) o.marked = 0;
  }
  std::size_t marked() const {
    std::size_t n = 0;
    for (const auto& o : objects) n += o.marked;
    return n;
  }
};

void dependent_chain_case(const bench_settings& settings, bench_report& report) {
  const std::size_t n = settings.smoke ? 200 : 4000;
  const std::string name = "dependent-chain/" + std::to_string(n);
  dependent_chain forward(n, false), backward(n, true);
  std::vector<object*> stack;
  auto is_alive = [](void* o) { return is_marked(o); };
  auto mark = [&](void* o) {
    auto* x = static_cast<object*>(o);
    if (!x->marked) {
      x->marked = 1;
      stack.push_back(x);
    }
  };
  auto linear = [&](dependent_chain& c) {
    c.unmark();
    mark(&c.objects[0]);
    gc::dependent_promotion p(c.table);
    p.start(is_alive, mark);
    while (!stack.empty()) {
      object* o = stack.back();
      stack.pop_back();
      p.on_marked(o, mark);
    }
  };
  auto rounds = [&](dependent_chain& c) {
    c.unmark();
    mark(&c.objects[0]);
    stack.clear();
    while (c.table.promote_dependents(is_alive, mark) != 0) stack.clear();
  };
  std::vector<variant_timing> variants;
  variants.push_back({"walk-order", [] {}, on_this_thread([&] { linear(forward); }), {}, {}});
  variants.push_back({"reverse-order", [] {}, on_this_thread([&] { linear(backward); }), {}, {}});
  variants.push_back({"rounds-walk-order", [] {}, on_this_thread([&] { rounds(forward); }), {}, {}});
  variants.push_back({"rounds-reverse-order", [] {}, on_this_thread([&] { rounds(backward); }), {}, {}});
  report.progress(name + ": a chain's promotion in and against the walk order, linear and by rounds");
  measure(variants, settings.repetitions(), settings.smoke ? 1 : settings.quick ? 3 : 5);
  linear(backward);
  rounds(forward);
  if (forward.marked() != n + 1 || backward.marked() != n + 1)
    throw std::runtime_error("gc dependent-chain: a promotion left part of the chain unmarked");
  report.describe_case(name, "ns_per_op = ns per link of the promotion of a chain of " + std::to_string(n) +
                                 " dependent handles from its root, by a collector with a mark stack: walk-order / "
                                 "reverse-order = dependent_promotion (start, then on_marked per object popped) with "
                                 "the links laid in / against the walks' order; rounds-* = promote_dependents "
                                 "rounds until one marks nothing; threads = GC threads.");
  std::vector<double> per_link;
  for (auto& v : variants) {
    per_link.push_back(median(v.repetition_medians) / static_cast<double>(n));
    report.add(
        {name, v.name, 1, "ns_per_op", per_link.back(), median(v.cpu_repetition_medians) / static_cast<double>(n)});
  }
  const std::string v = verdict("reverse-order/walk-order", per_link[1] / per_link[0], 2.0, true);
  report.progress("target (" + name + "): " + v);
  report.describe_case("targets (" + name + ")", v + ".");
}

void run_gc(const bench_settings& settings, bench_report& report) {
  if (settings.threads && *settings.threads != 1 && *settings.threads != 2)
    throw usage_error("palrt-bench gc: --threads must be 1 or 2 (the GC threads of parallel-sweep)");
  young_sweep(settings, report);
  parallel_sweep(settings, report);
  sweep_relocate(settings, report);
  dependent_chain_case(settings, report);
}

}  // namespace

bench_component gc_component() {
  return {"gc",
          "handle table walks for production collectors: a young sweep with ages against a full one, a sweep "
          "shared by 1 and 2 GC threads, sweep-and-relocate in one pass against a sweep, a dependent chain's "
          "promotion in and against the walk order",
          run_gc};
}

}  // namespace palrt::bench

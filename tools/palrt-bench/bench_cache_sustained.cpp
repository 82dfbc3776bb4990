// SPDX-License-Identifier: MIT
// palrt-bench cache, case `sustained`: the seed's sustained-construction scenario. Wrappers
// are created and dropped continuously while the same threads look up live ones, so the
// finalizer thread removes dead wrappers' entries while readers use the cache. With one lock
// for the whole cache the finalizer's removals wait behind the readers and dead wrappers stay
// cached longer (the seed: "the finalizer thread stalls acquiring the write lock").
//
// The four identity_cache designs, each in a runtime of its own (handle table, collector,
// finalizer thread), so that one design's finalizer never works off another's dead
// wrappers. `threads` mutators (2 by default, --threads N) each, at a fixed pace (one every
// 20 us, the same for every design):
//   - create a wrapper: get_or_create<T>(identity, factory) for the next identity of its own
//     pool, a miss (the factory runs: checked), then drop it at once; the drop time is
//     stamped in the identity (a 16-byte native object) just before;
// and in between look up the 64 rooted wrappers, { read_section; find(); read a field },
// each lookup timed alone between two clock reads.
// A collector thread calls collect() every millisecond: one collection finds the dropped
// wrappers dead and frees them, which drops their records, and queues the records for the
// finalizer thread, whose finalization of a record removes its entry (or finds it gone: palrt's
// design also drops the entries of dead wrappers when it rebuilds a bucket's table) and
// then calls the cache's on_removed, which stamps the time in the identity. Collections run
// on a clock, not on allocations (collector_options::collect_every), and creations at a
// pace, so that every design's finalizer has the same work and every lock the same writers:
// run as fast as they can, the lock-based designs create fewer wrappers (their writers wait
// for readers) and their finalizers would have less to do.
//
// An identity is used again only once on_removed reported its last wrapper's record (its
// entry is gone then); until then its mutator skips it (the pool is large enough that this
// is rare; stderr counts it). get_or_create would otherwise replace the dead entry itself,
// and only the quick removals would be counted.
//
// Metrics (threads = mutators): p50_ns / p99_ns of the lookups (each includes one clock read,
// ~20 ns, the same for every design); queue_wait_p50_ns / queue_wait_p99_ns, from a drop to
// the on_removed call of its record; ops_per_s, creations per second by all mutators
// together (below the pace if a design could not keep up).
//
// The designs alternate in slices (100 ms; 20 ms with --quick) in shuffled order. After each
// slice the design's runtime is settled (collections and finalization until nothing is dead)
// so that the next slice of any design starts clean and no drop waits through another
// design's slice. The settling's collections would end waits early, so a wait counts only if
// its wrapper was dropped in the first three quarters of the slice: the last quarter keeps
// the load on and gives those waits time to end on their own (stderr counts the counted ones
// the settling ended anyway). Each repetition gives one value per metric per design (its
// slices' lookups and waits together); median of the repetitions.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <palrt/interop/identity_cache.hpp>
#include <palrt/pal/thread_factory.hpp>
#include <palrt/gc/read_section.hpp>

#include "bench_cache.hpp"
#include "bench_latency.hpp"
#include "bench_report.hpp"

namespace palrt::bench::cache {

namespace {

using interop::identity_cache;
using gc::ref;

constexpr const char* sustained_case = "sustained";
constexpr std::size_t rooted_count = 64;           // looked up; a power of two
constexpr std::size_t pool_per_mutator = 1 << 16;  // identities a mutator creates wrappers for, in turn
constexpr auto collection_period = std::chrono::milliseconds(1);
// Each mutator creates one wrapper every creation_period (50,000 a second) and looks up in
// between, in rounds of lookups_per_round.
constexpr auto creation_period = std::chrono::microseconds(20);
constexpr int lookups_per_round = 4;

// One design's runtime, cache, rooted wrappers and pool.
struct design_rig {
  design_rig(cache_design design, int mutators)
      : cache(make_cache(rt.gc, design, interop::cache_options{.on_removed = &on_removed})),
        rooted_ids(rooted_count),
        pool(pool_per_mutator * static_cast<std::size_t>(mutators)) {
    for (const void* id : rooted_ids.identities) {
      rooted.push_back(cache.get_or_create<bench_wrapper>(
          id, [this](const void* i) { return gc::make_object<bench_wrapper>(rt.gc, i); }));
    }
  }
  // The rooted wrappers die first, and their records retire while the cache and the
  // identities are still there.
  ~design_rig() {
    rooted.clear();
    try {
      rt.settle();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "palrt-bench cache: while shutting a design down: %s\n", e.what());
    }
  }
  design_rig(const design_rig&) = delete;
  design_rig& operator=(const design_rig&) = delete;

  // Called once per wrapper the cache cached, when its record retires (usually on the
  // finalizer thread), with no lock held: its entry is gone.
  static void on_removed(void*, const void* identity) noexcept {
    // The identity is one of this rig's native objects; the cache hands it back as const,
    // the benchmark owns it.
    auto* native = static_cast<native_object*>(const_cast<void*>(identity));
    // release: the mutator (or the settling thread) that sees the stamp with acquire then
    // owns the identity again.
    native->removed_ns.store(now_ns(), std::memory_order_release);
  }

  runtime rt;
  identity_cache cache;
  identity_pool rooted_ids;
  std::vector<ref<bench_wrapper>> rooted;
  identity_pool pool;  // mutator m uses [m * pool_per_mutator, (m + 1) * pool_per_mutator)
};

// The thread that collects every collection_period for the design whose slice runs.
class periodic_collector {
 public:
  periodic_collector() : thread_(pal::start_thread({"bench-cache-gc"}, [this] { loop(); })) {}
  ~periodic_collector() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (!thread_.join_for(std::chrono::seconds(10))) {
      std::fprintf(stderr, "palrt-bench cache: the collector thread did not stop within 10 s\n");
      thread_.detach();  // it uses `this`, but the process is about to report and exit
    }
  }
  periodic_collector(const periodic_collector&) = delete;
  periodic_collector& operator=(const periodic_collector&) = delete;

  // Collects `rig` until end(); end() returns once no collection of it is running.
  void begin(design_rig& rig) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ = &rig;
    }
    wake_.notify_all();
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = nullptr;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || current_ != nullptr; });
      if (stop_) return;
      auto next = bench_clock::now() + collection_period;
      while (current_ != nullptr && !stop_) {
        current_->rt.gc.collect();  // under the mutex: end() waits for it
        lock.unlock();
        std::this_thread::sleep_until(next);
        next += collection_period;
        lock.lock();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  design_rig* current_ = nullptr;
  bool stop_ = false;
  pal::managed_thread thread_;  // last: it starts once the rest is set up
};

// One mutator's state, kept from slice to slice, and what it measured.
struct mutator {
  std::size_t cursor = 0;          // next identity of its pool to try
  std::uint64_t lookup_i = 0;      // next rooted wrapper to look up
  latency_histogram lookups;       // this repetition
  latency_histogram waits;         // this repetition: the ones it harvested itself
  std::uint64_t created = 0;       // this slice
  std::uint64_t skipped = 0;       // identities whose last record had not retired yet
  std::uint64_t factory_hits = 0;  // creations that found a live wrapper (never expected)
  member_run run;
};

// If on_removed reported the record of the identity's last wrapper (or it has none), records
// the wait if the wrapper was dropped by `counted_until` and makes the identity free again;
// false if it is still pending.
bool harvest(native_object& n, std::int64_t counted_until, latency_histogram& waits) noexcept {
  const std::int64_t dropped = n.dropped_ns.load(std::memory_order_relaxed);
  if (dropped == 0) return true;
  // acquire: pairs with on_removed's release.
  const std::int64_t removed = n.removed_ns.load(std::memory_order_acquire);
  if (removed == 0) return false;
  if (dropped <= counted_until) waits.record(removed - dropped);
  n.dropped_ns.store(0, std::memory_order_relaxed);
  n.removed_ns.store(0, std::memory_order_relaxed);
  return true;
}

void mutate(design_rig& rig, mutator& m, int member, bench_clock::time_point until, std::int64_t counted_until) {
  identity_cache& cache = rig.cache;
  const std::unique_ptr<native_object>* pool =
      rig.pool.objects.data() + static_cast<std::size_t>(member) * pool_per_mutator;
  const void* const* rooted = rig.rooted_ids.identities.data();
  const std::uint64_t offset = static_cast<std::uint64_t>(member) * 37;
  m.created = 0;
  bool made = false;
  auto factory = [&](const void* id) {  // not const: get_or_create takes the factory's address as void*
    made = true;
    return gc::make_object<bench_wrapper>(rig.rt.gc, id);
  };
  const stopwatch timer;
  auto now = timer.started();
  // The creations' schedule: one every creation_period. A mutator that fell behind catches
  // up at one creation per round of lookups, never in a burst.
  auto next_creation = timer.started();
  while (now < until) {
    // One creation when it is due, for the next identity whose last record retired.
    for (std::size_t tries = 0; now >= next_creation && tries < pool_per_mutator; ++tries) {
      native_object& n = *pool[m.cursor];
      m.cursor = (m.cursor + 1) % pool_per_mutator;
      if (!harvest(n, counted_until, m.waits)) {
        ++m.skipped;
        continue;
      }
      made = false;
      ref<bench_wrapper> w = cache.get_or_create<bench_wrapper>(&n, factory);
      consume(w.get());
      ++m.created;
      if (!made) ++m.factory_hits;
      n.dropped_ns.store(now_ns(), std::memory_order_relaxed);
      w.reset();
      next_creation += creation_period;
      break;
    }
    // Lookups of the rooted wrappers, each timed alone.
    now = bench_clock::now();
    for (int k = 0; k < lookups_per_round; ++k) {
      const void* id = rooted[(m.lookup_i++ + offset) & (rooted_count - 1)];
      const auto t0 = now;
      {
        gc::read_section section;
        consume(cache.find(id));
      }
      now = bench_clock::now();
      m.lookups.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0).count());
    }
  }
  m.run = member_run::of(timer.started(), timer.stop(m.created));
}

// What settling after a slice found, of the drops it counts.
struct settled {
  std::uint64_t counted = 0;    // drops in the counted part of the slice
  std::uint64_t cut_short = 0;  // of them, records that retired after the slice ended
};

// After a slice: collect and finalize until nothing is dead (every dropped wrapper's record
// retired, and on_removed reported it), then take the waits the mutators did not come back
// for. (That no entry outlives its record is checked at the end of the case: dead_replaced
// counts the identities found still cached when they were used again.)
settled settle_slice(design_rig& rig, std::int64_t slice_end, std::int64_t counted_until, latency_histogram& waits) {
  rig.rt.settle();
  settled result;
  for (auto& n : rig.pool.objects) {
    const std::int64_t dropped = n->dropped_ns.load(std::memory_order_relaxed);
    if (dropped == 0) continue;
    if (dropped <= counted_until) {
      ++result.counted;
      if (n->removed_ns.load(std::memory_order_acquire) > slice_end) ++result.cut_short;
    }
    if (!harvest(*n, counted_until, waits))
      throw std::runtime_error(std::string(sustained_case) + ": " + design_name(rig.cache) +
                               ": on_removed did not report a dropped wrapper's record after settling");
  }
  return result;
}

struct repetition_values {
  std::vector<double> p50, p99, wait_p50, wait_p99, rate;
  std::vector<double> cpu_rate;  // the rate's CPU-timed twin: creations / the mutators' mean CPU time
};

}  // namespace

void run_sustained(const bench_settings& settings, bench_report& report, int threads) {
  const auto slice = settings.quick ? std::chrono::milliseconds(20) : std::chrono::milliseconds(100);
  const auto counted_part = slice * 3 / 4;
  const std::int64_t slices = std::max<std::int64_t>(1, settings.run_budget() / slice);
  const auto slice_ms = std::chrono::duration_cast<std::chrono::milliseconds>(slice).count();
  report.describe_case(
      sustained_case,
      "threads = mutators, each creating one wrapper every " +
          std::to_string(std::chrono::microseconds(creation_period).count()) +
          " us (get_or_create for the next identity of its own pool, a miss: a new wrapper, dropped at once) and "
          "looking up " +
          std::to_string(rooted_count) +
          " rooted wrappers in between ({ read_section; find(); read a field }, each timed alone: p50_ns/p99_ns "
          "include one clock read). A collector thread calls collect() every " +
          std::to_string(std::chrono::milliseconds(collection_period).count()) +
          " ms; the finalizer thread finalizes the dead wrappers' records, which remove their entries. queue_wait = "
          "drop to the on_removed call of the wrapper's record (its entry is gone by then), for drops in the first "
          "3/4 of a slice. ops_per_s = creations per second, all mutators (below the pace if a design could not "
          "keep up). Each design has its own runtime; the designs alternate in " +
          std::to_string(slice_ms) +
          " ms slices in shuffled order, each followed by collections until nothing is "
          "dead; " +
          std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(slices) +
          " slice(s) per design, median of the repetitions. The peers have no removal protocol: not measured.");

  auto team = std::make_shared<thread_team>(threads, team_cpus(), "bench-cache");
  periodic_collector collector;
  report.progress(std::string(sustained_case) + " with " + std::to_string(threads) + " mutator thread" +
                  (threads == 1 ? "" : "s") + " (" + std::to_string(team->pinned()) + " of " + std::to_string(threads) +
                  " pinned): " + std::to_string(std::size(cache_designs)) + " designs x " +
                  std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(slices) + " x " +
                  std::to_string(slice_ms) + " ms");

  const std::size_t n = std::size(cache_designs);
  std::vector<std::unique_ptr<design_rig>> rigs;
  for (const cache_design d : cache_designs) rigs.push_back(std::make_unique<design_rig>(d, threads));
  std::vector<std::vector<mutator>> mutators(n, std::vector<mutator>(static_cast<std::size_t>(threads)));

  // Per design: each repetition's values, and counts over the measured repetitions.
  std::vector<repetition_values> values(n);
  struct tally {
    std::uint64_t skipped = 0, factory_hits = 0, collections = 0, counted = 0, cut_short = 0;
  };
  std::vector<tally> totals(n);
  std::minstd_rand shuffler(0xcace);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (int rep = -1; rep < settings.repetitions(); ++rep) {  // -1: warm-up (one slice each), discarded
    std::vector<latency_histogram> settled_waits(n);
    std::vector<std::uint64_t> created(n, 0);
    std::vector<double> elapsed_ns(n, 0.0), cpu_ns(n, 0.0);
    for (auto& per_design : mutators) {
      for (auto& m : per_design) {
        m.lookups.reset();
        m.waits.reset();
        m.skipped = m.factory_hits = 0;
      }
    }
    for (std::int64_t s = 0; s < (rep < 0 ? 1 : slices); ++s) {
      std::shuffle(order.begin(), order.end(), shuffler);
      for (const std::size_t i : order) {
        design_rig& rig = *rigs[i];
        auto& ms = mutators[i];
        const std::uint64_t collections_before = rig.rt.gc.counters().collections;
        const auto start = bench_clock::now();
        const std::int64_t counted_until = now_ns() + std::chrono::nanoseconds(counted_part).count();
        collector.begin(rig);
        team->run([&](int member) {
          mutate(rig, ms[static_cast<std::size_t>(member)], member, start + slice, counted_until);
        });
        collector.end();
        std::vector<member_run> runs;
        for (const auto& m : ms) {
          runs.push_back(m.run);
          created[i] += m.created;
        }
        const timed_run slice_run = team_result(runs, team->cpus_used());
        elapsed_ns[i] += static_cast<double>(slice_run.elapsed.count());
        cpu_ns[i] += static_cast<double>(slice_run.cpu.count());
        const std::uint64_t collections = rig.rt.gc.counters().collections - collections_before;
        const settled after = settle_slice(rig, now_ns(), counted_until, settled_waits[i]);
        if (rep >= 0) {
          totals[i].collections += collections;
          totals[i].counted += after.counted;
          totals[i].cut_short += after.cut_short;
        }
      }
    }
    if (rep < 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      latency_histogram lookups, waits = settled_waits[i];
      for (const auto& m : mutators[i]) {
        lookups.merge(m.lookups);
        waits.merge(m.waits);
        totals[i].skipped += m.skipped;
        totals[i].factory_hits += m.factory_hits;
      }
      values[i].p50.push_back(lookups.quantile(0.50));
      values[i].p99.push_back(lookups.quantile(0.99));
      values[i].wait_p50.push_back(waits.quantile(0.50));
      values[i].wait_p99.push_back(waits.quantile(0.99));
      values[i].rate.push_back(elapsed_ns[i] > 0 ? static_cast<double>(created[i]) * 1e9 / elapsed_ns[i] : 0.0);
      values[i].cpu_rate.push_back(cpu_ns[i] > 0 ? static_cast<double>(created[i]) * 1e9 / cpu_ns[i] : 0.0);
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = cache_design_name(cache_designs[i]);
    const tally& t = totals[i];
    if (t.factory_hits != 0)
      throw std::runtime_error(std::string(sustained_case) + ": " + name + ": " + std::to_string(t.factory_hits) +
                               " creations found a live wrapper for an identity whose wrapper was dropped");
    // An identity is used again only once its record retired: an entry that outlived its
    // record would be found and replaced here.
    if (const std::uint64_t left_behind = rigs[i]->cache.counters().dead_replaced; left_behind != 0)
      report.progress("  " + name + ": WARNING: " + std::to_string(left_behind) +
                      " entries of dead wrappers were still cached when their identity was used again, after their "
                      "records had retired");
    const sample_spread p50 = spread_of(values[i].p50), p99 = spread_of(values[i].p99),
                        w50 = spread_of(values[i].wait_p50), w99 = spread_of(values[i].wait_p99),
                        rate = spread_of(values[i].rate);
    // The rate has a CPU-timed twin (the mutators' CPU clocks); the latencies, measured in the
    // same slices, take its verdict.
    const double cpu_rate = median(values[i].cpu_rate);
    const bool disturbed = is_disturbed(rate.median, cpu_rate);
    report.add({sustained_case, name, threads, "p50_ns", p50.median, std::nullopt, disturbed});
    report.add({sustained_case, name, threads, "p99_ns", p99.median, std::nullopt, disturbed});
    report.add({sustained_case, name, threads, "queue_wait_p50_ns", w50.median, std::nullopt, disturbed});
    report.add({sustained_case, name, threads, "queue_wait_p99_ns", w99.median, std::nullopt, disturbed});
    report.add({sustained_case, name, threads, "ops_per_s", rate.median, cpu_rate});
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "  %s: lookup p50 %.0f ns, p99 %.0f ns (repetitions %.0f .. %.0f); queue wait p50 %.0f us, p99 %.0f "
                  "us (%.0f .. %.0f); %.3f M creations/s; %llu collections in the slices; of %llu counted drops, %llu "
                  "records retired in the settling after a slice; %llu identities skipped (record not retired yet)",
                  name.c_str(), p50.median, p99.median, p99.min, p99.max, w50.median / 1e3, w99.median / 1e3,
                  w99.min / 1e3, w99.max / 1e3, rate.median / 1e6, static_cast<unsigned long long>(t.collections),
                  static_cast<unsigned long long>(t.counted), static_cast<unsigned long long>(t.cut_short),
                  static_cast<unsigned long long>(t.skipped));
    report.progress(buf + cpu_clock_note(rate.median, cpu_rate));
  }
  // The rigs go (each settles its runtime and stops its finalizer) before the team's threads.
  rigs.clear();
}

}  // namespace palrt::bench::cache

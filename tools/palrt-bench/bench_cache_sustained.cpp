// palrt-bench cache, case `sustained`: the seed's sustained-construction scenario. Wrappers
// are created and dropped continuously while the same threads look up live ones, so the
// finalizer thread removes dead wrappers' entries while readers use the cache. With one lock
// for the whole cache the finalizer's removals wait behind the readers and dead wrappers stay
// cached longer (the seed: "the finalizer thread stalls acquiring the write lock").
//
// The four identity_cache designs, each in a runtime of its own (handle table, collector with
// collect_every, finalizer thread), so that one design's finalizer never works off another's
// dead wrappers. `threads` mutators (2 by default, --threads N) each repeat:
//   - one creation: get_or_create<T>(identity, factory) for the next identity of its own
//     pool, a miss (the factory runs: checked), then the wrapper is dropped at once; the drop
//     time is stamped in the identity (a 16-byte native object) just before;
//   - `lookups_per_creation` lookups of the 64 rooted wrappers, { read_section; find();
//     read a field }, each timed alone between two clock reads.
// Collections run on the mutators' allocations (collector_options::collect_every); each
// finds the dropped wrappers dead and frees them, the next queues their records, and the
// finalizer thread's finalization of a record removes its entry and calls the cache's
// on_removed, which stamps the removal time in the identity.
//
// An identity whose entry has not been removed yet is skipped when its mutator comes back to
// it (the pool is large enough that this is rare; stderr counts it): get_or_create would
// replace the dead entry itself, and that drop's removal time would never be known, so only
// the quick ones would be counted.
//
// Metrics (threads = mutators): p50_ns / p99_ns of the lookups (each includes one clock read,
// ~20 ns, the same for every design); queue_wait_p50_ns / queue_wait_p99_ns, from a drop to
// the removal of its entry; ops_per_s, creations per second by all mutators together.
// The designs alternate in slices of 50 ms (10 ms with --quick), in shuffled order; after each
// slice the design's runtime is settled (collect and finalize until every dropped wrapper's
// entry is removed, counted in queue_wait) so that the next design starts clean and no drop
// waits through another design's slice. Each repetition gives one value per metric per
// design (its slices' lookups and waits together); median of the repetitions.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <palrt/interop/identity_cache.hpp>
#include <palrt/sync/read_section.hpp>

#include "bench_cache.hpp"
#include "bench_latency.hpp"
#include "bench_report.hpp"

namespace palrt::bench::cache {

namespace {

using interop::cache_design;
using interop::identity_cache;
using sync::ref;

constexpr const char* sustained_case = "sustained";
constexpr std::size_t rooted_count = 64;         // looked up; a power of two
constexpr int lookups_per_creation = 16;
constexpr std::size_t pool_per_mutator = 1 << 16;  // identities a mutator creates wrappers for, in turn
// Allocations (each creation makes two: the wrapper and its record) between collections,
// counted per allocating thread.
constexpr std::size_t collect_every = 4096;

// One design's runtime, cache, rooted wrappers and pools, and what on_removed counts.
struct design_rig {
  design_rig(cache_design design, int mutators)
      : rt(sync::collector_options{.collect_every = collect_every}),
        cache(rt.gc, interop::cache_options{.design = design, .on_removed = &on_removed, .on_removed_context = this}),
        rooted_ids(rooted_count),
        pool(pool_per_mutator * static_cast<std::size_t>(mutators)) {
    for (const void* id : rooted_ids.identities) {
      rooted.push_back(cache.get_or_create<bench_wrapper>(id, [this](const void* i) {
        return sync::make_object<bench_wrapper>(rt.gc, i);
      }));
    }
  }

  // Called by the thread that removed a dead wrapper's entry (the finalizer thread), with
  // no lock held.
  static void on_removed(void* context, const void* identity) noexcept {
    auto& rig = *static_cast<design_rig*>(context);
    // The identity is one of the pool's native objects (rooted wrappers never die); the
    // cache hands it back as const, the benchmark owns it.
    auto* native = static_cast<native_object*>(const_cast<void*>(identity));
    // release: the mutator (or the settling thread) that sees the stamp with acquire then
    // owns the identity again.
    native->removed_ns.store(now_ns(), std::memory_order_release);
    rig.removed.fetch_add(1, std::memory_order_relaxed);
  }

  // The rooted wrappers die first, and their entries are removed while the cache and the
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

  runtime rt;
  identity_cache cache;
  identity_pool rooted_ids;
  std::vector<ref<bench_wrapper>> rooted;
  identity_pool pool;  // mutator m uses [m * pool_per_mutator, (m + 1) * pool_per_mutator)
  std::atomic<std::uint64_t> removed{0};
};

// One mutator's state, kept from slice to slice, and what it measured in the repetition.
struct mutator {
  std::size_t cursor = 0;      // next identity of its pool to try
  std::uint64_t lookup_i = 0;  // next rooted wrapper to look up
  latency_histogram lookups;
  latency_histogram waits;     // harvested when it comes back to an identity
  std::uint64_t created = 0;   // this slice
  std::uint64_t dropped = 0;   // this slice
  std::uint64_t skipped = 0;   // identities still cached when it came back to them
  std::uint64_t factory_hits = 0;  // a creation that found a live wrapper (never expected)
  member_run run;
};

// Records the wait of an identity whose entry was removed and makes it free again; false if
// its wrapper was dropped and the entry is still there.
bool harvest(native_object& n, latency_histogram& waits) noexcept {
  const std::int64_t dropped = n.dropped_ns.load(std::memory_order_relaxed);
  if (dropped == 0) return true;
  // acquire: pairs with on_removed's release.
  const std::int64_t removed = n.removed_ns.load(std::memory_order_acquire);
  if (removed == 0) return false;
  waits.record(removed - dropped);
  n.dropped_ns.store(0, std::memory_order_relaxed);
  n.removed_ns.store(0, std::memory_order_relaxed);
  return true;
}

void mutate(design_rig& rig, mutator& m, int member, std::chrono::nanoseconds budget) {
  identity_cache& cache = rig.cache;
  const std::unique_ptr<native_object>* pool = rig.pool.objects.data() + static_cast<std::size_t>(member) * pool_per_mutator;
  const void* const* rooted = rig.rooted_ids.identities.data();
  const std::uint64_t offset = static_cast<std::uint64_t>(member) * 37;
  m.created = m.dropped = 0;
  bool made = false;
  auto factory = [&](const void* id) {  // not const: get_or_create takes the factory's address as void*
    made = true;
    return sync::make_object<bench_wrapper>(rig.rt.gc, id);
  };
  m.run.start = bench_clock::now();
  const auto until = m.run.start + budget;
  for (;;) {
    // One creation, for the next identity whose previous wrapper's entry is gone.
    for (std::size_t tries = 0; tries < pool_per_mutator; ++tries) {
      native_object& n = *pool[m.cursor];
      m.cursor = (m.cursor + 1) % pool_per_mutator;
      if (!harvest(n, m.waits)) {
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
      ++m.dropped;
      break;
    }
    // Lookups of the rooted wrappers, each timed alone.
    for (int k = 0; k < lookups_per_creation; ++k) {
      const void* id = rooted[(m.lookup_i++ + offset) & (rooted_count - 1)];
      const auto t0 = bench_clock::now();
      {
        sync::read_section section;
        consume(cache.find(id));
      }
      const auto t1 = bench_clock::now();
      m.lookups.record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    }
    if (bench_clock::now() >= until) break;
  }
  m.run.end = bench_clock::now();
  m.run.ops = m.created;
}

// After a slice: collect and finalize until every dropped wrapper's entry is removed, then
// take the waits the mutators did not come back for. Returns how many of them ended after the
// slice did (`slice_end`): the ones the settling collections cut short.
std::uint64_t settle_slice(design_rig& rig, std::uint64_t dropped_total, std::int64_t slice_end,
                           latency_histogram& waits) {
  for (int round = 0; rig.removed.load(std::memory_order_acquire) < dropped_total; ++round) {
    if (round == 16)
      throw std::runtime_error(std::string(sustained_case) + ": " + interop::cache_design_name(rig.cache.design()) +
                               ": " + std::to_string(dropped_total - rig.removed.load()) +
                               " dropped wrappers' entries were not removed after 16 collections");
    rig.rt.settle();
  }
  std::uint64_t after_slice = 0;
  for (auto& n : rig.pool.objects) {
    if (n->removed_ns.load(std::memory_order_acquire) > slice_end) ++after_slice;
    if (!harvest(*n, waits))
      throw std::logic_error(std::string(sustained_case) + ": an entry was counted as removed but its identity was not");
  }
  return after_slice;
}

struct repetition_values {
  std::vector<double> p50, p99, wait_p50, wait_p99, rate;
};

}  // namespace

void run_sustained(const bench_settings& settings, bench_report& report, int threads) {
  const auto slice = settings.quick ? std::chrono::milliseconds(10) : std::chrono::milliseconds(50);
  const auto budget = std::max<std::chrono::nanoseconds>(settings.run_budget(), slice);
  const std::int64_t slices = budget / slice;
  const auto slice_ms = std::chrono::duration_cast<std::chrono::milliseconds>(slice).count();
  report.describe_case(
      sustained_case,
      "threads = mutators, each repeating: get_or_create for the next identity of its own pool (a miss: a new "
      "wrapper), drop it at once, then " +
          std::to_string(lookups_per_creation) + " lookups of " + std::to_string(rooted_count) +
          " rooted wrappers ({ read_section; find(); read a field }, each timed alone: p50_ns/p99_ns, which include "
          "one clock read). Collections every " +
          std::to_string(collect_every) +
          " allocations per thread (collector_options::collect_every); the finalizer thread finalizes the dead "
          "wrappers' records, which remove their entries. queue_wait = drop to entry removal (cache_options."
          "on_removed); ops_per_s = creations per second, all mutators. Each design has its own runtime; designs "
          "alternate in " +
          std::to_string(slice_ms) + " ms slices in shuffled order, each slice followed by collections until every "
          "dropped wrapper's entry is removed; " +
          std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(slices) +
          " slices per design, median of the repetitions. Peers have no removal protocol: not measured.");

  auto team = std::make_shared<thread_team>(threads, team_cpus(), "bench-cache");
  report.progress(std::string(sustained_case) + " with " + std::to_string(threads) + " mutator thread" +
                  (threads == 1 ? "" : "s") + " (" + std::to_string(team->pinned()) + " of " + std::to_string(threads) +
                  " pinned): " + std::to_string(std::size(cache_designs)) + " designs x " +
                  std::to_string(settings.repetitions()) + " repetitions of " + std::to_string(slices) + " x " +
                  std::to_string(slice_ms) + " ms");

  const std::size_t n = std::size(cache_designs);
  std::vector<std::unique_ptr<design_rig>> rigs;
  std::vector<std::vector<mutator>> mutators(n, std::vector<mutator>(static_cast<std::size_t>(threads)));
  std::vector<std::uint64_t> dropped_total(n, 0);
  std::vector<std::uint64_t> collections_before(n, 0);
  for (const cache_design d : cache_designs) rigs.push_back(std::make_unique<design_rig>(d, threads));

  std::vector<repetition_values> values(n);
  std::vector<std::uint64_t> skipped(n, 0), factory_hits(n, 0), settled_waits(n, 0);
  std::minstd_rand shuffler(0xcace);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (int rep = -1; rep < settings.repetitions(); ++rep) {  // -1: warm-up (one slice each), discarded
    std::vector<latency_histogram> lookups(n), waits(n);
    std::vector<std::uint64_t> created(n, 0);
    std::vector<double> elapsed_ns(n, 0.0);
    for (auto& per_design : mutators) {
      for (auto& m : per_design) {
        m.lookups.reset();
        m.waits.reset();
      }
    }
    if (rep == 0) {
      for (std::size_t i = 0; i < n; ++i) collections_before[i] = rigs[i]->rt.gc.counters().collections;
    }
    for (std::int64_t s = 0; s < (rep < 0 ? 1 : slices); ++s) {
      std::shuffle(order.begin(), order.end(), shuffler);
      for (const std::size_t i : order) {
        design_rig& rig = *rigs[i];
        auto& ms = mutators[i];
        team->run([&](int member) { mutate(rig, ms[static_cast<std::size_t>(member)], member, slice); });
        std::vector<member_run> runs;
        for (const auto& m : ms) {
          runs.push_back(m.run);
          dropped_total[i] += m.dropped;
          created[i] += m.created;
          if (rep >= 0) {
            skipped[i] += m.skipped;
            factory_hits[i] += m.factory_hits;
          }
        }
        for (auto& m : ms) m.skipped = m.factory_hits = 0;
        elapsed_ns[i] += static_cast<double>(team_result(runs).elapsed.count());
        const std::int64_t slice_end = now_ns();
        const std::uint64_t cut_short = settle_slice(rig, dropped_total[i], slice_end, waits[i]);
        if (rep >= 0) settled_waits[i] += cut_short;
      }
    }
    if (rep < 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      for (const auto& m : mutators[i]) {
        lookups[i].merge(m.lookups);
        waits[i].merge(m.waits);
      }
      values[i].p50.push_back(lookups[i].quantile(0.50));
      values[i].p99.push_back(lookups[i].quantile(0.99));
      values[i].wait_p50.push_back(waits[i].quantile(0.50));
      values[i].wait_p99.push_back(waits[i].quantile(0.99));
      values[i].rate.push_back(elapsed_ns[i] > 0 ? static_cast<double>(created[i]) * 1e9 / elapsed_ns[i] : 0.0);
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = interop::cache_design_name(cache_designs[i]);
    if (factory_hits[i] != 0)
      throw std::runtime_error(std::string(sustained_case) + ": " + name + ": " + std::to_string(factory_hits[i]) +
                               " creations found a live wrapper for an identity whose wrapper was dropped");
    const sample_spread p50 = spread_of(values[i].p50), p99 = spread_of(values[i].p99),
                        w50 = spread_of(values[i].wait_p50), w99 = spread_of(values[i].wait_p99),
                        rate = spread_of(values[i].rate);
    report.add({sustained_case, name, threads, "p50_ns", p50.median});
    report.add({sustained_case, name, threads, "p99_ns", p99.median});
    report.add({sustained_case, name, threads, "queue_wait_p50_ns", w50.median});
    report.add({sustained_case, name, threads, "queue_wait_p99_ns", w99.median});
    report.add({sustained_case, name, threads, "ops_per_s", rate.median});
    const std::uint64_t collections = rigs[i]->rt.gc.counters().collections - collections_before[i];
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "  %s: lookup p50 %.0f ns, p99 %.0f ns (repetitions %.0f .. %.0f); queue wait p50 %.0f us, p99 %.0f "
                  "us (%.0f .. %.0f); %.2f M creations/s; %llu collections; %llu waits ended by settling after a "
                  "slice; %llu identities skipped (entry not removed yet)",
                  name.c_str(), p50.median, p99.median, p99.min, p99.max, w50.median / 1e3, w99.median / 1e3,
                  w99.min / 1e3, w99.max / 1e3, rate.median / 1e6, static_cast<unsigned long long>(collections),
                  static_cast<unsigned long long>(settled_waits[i]), static_cast<unsigned long long>(skipped[i]));
    report.progress(buf);
  }
  // The rigs go (each settles its runtime and stops its finalizer) before the team's threads.
  rigs.clear();
}

}  // namespace palrt::bench::cache

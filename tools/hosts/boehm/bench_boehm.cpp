// SPDX-License-Identifier: MIT
// palrt-boehm-bench: one measurement of the Boehm host, in a process of its own (Boehm's state
// is process-wide), printed as one JSON object per metric on stdout. bench_boehm.py runs it
// for every case and variant, interleaved, and keeps the medians.
//
//   palrt-boehm-bench --case weak-pair|pause|hit --variant palrt|boehm-links|none [--threads N]
//
// Cases:
//   weak-pair  a weak reference made and dropped on a live object: palrt's weak-short handle
//              (allocate + release) against a Boehm short link (register + unregister).
//   pause      100,000 live objects (held from a GC_MALLOC'd array), each with a weak
//              reference to it: palrt's weak-short handles (the collector_binding installed),
//              Boehm short links, or none; 15 full collections (GC_gcollect), reporting the
//              median world-stopped time (GC_EVENT_PRE_STOP_WORLD to POST_START_WORLD,
//              `pause_ns`) and the median whole collection (`collect_ns`).
//   hit        1024 natives with live wrappers (Boehm objects); N threads each ask for a
//              random native's wrapper: palrt's identity cache for Boehm objects (try_get),
//              against a std::unordered_map whose values are Boehm short links, read under
//              Boehm's lock (GC_call_with_alloc_lock), as Boehm's documentation says links are
//              read. Aggregate ns per lookup over all threads; the median of 5 repetitions.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "host_objects.hpp"
#include "palrt/boehm/collector_binding.hpp"
#include "palrt/boehm/thread_registration.hpp"
#include "palrt/gc/handle_table.hpp"

using namespace palrt;
using boehm_host::cell;
using clock_type = std::chrono::steady_clock;

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

void emit(const std::string& c, const std::string& variant, int threads, const char* metric, double value) {
  std::printf("{\"case\": \"%s\", \"variant\": \"%s\", \"threads\": %d, \"metric\": \"%s\", \"value\": %.3f}\n",
              c.c_str(), variant.c_str(), threads, metric, value);
}

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --- weak-pair ---
double weak_pair(const std::string& variant) {
  constexpr int iterations = 2'000'000;
  cell* object = boehm_host::make_cell(1);
  std::uint64_t sink = 0;
  std::int64_t t0 = 0, t1 = 0;
  if (variant == "palrt") {
    gc::handle_table table;
    boehm::collector_binding binding(table);
    for (int i = 0; i < iterations / 10; ++i) table.release(table.allocate(gc::handle_kind::weak_short, object));
    t0 = now_ns();
    for (int i = 0; i < iterations; ++i) {
      gc::handle h = table.allocate(gc::handle_kind::weak_short, object);
      sink += reinterpret_cast<std::uintptr_t>(table.release(h));
    }
    t1 = now_ns();
  } else {
    void* link = nullptr;
    t0 = now_ns();
    for (int i = 0; i < iterations; ++i) {
      link = object;
      GC_general_register_disappearing_link(&link, object);
      GC_unregister_disappearing_link(&link);
      sink += reinterpret_cast<std::uintptr_t>(link);
    }
    t1 = now_ns();
  }
  if (sink == 42) std::puts("");
  GC_reachable_here(object);
  return static_cast<double>(t1 - t0) / iterations;
}

// --- pause ---
std::atomic<std::int64_t> stop_started{0};
std::vector<std::int64_t>* pauses = nullptr;
void GC_CALLBACK time_pause(GC_EventType e) {
  if (e == GC_EVENT_PRE_STOP_WORLD) stop_started.store(now_ns(), std::memory_order_relaxed);
  if (e == GC_EVENT_POST_START_WORLD && pauses)
    pauses->push_back(now_ns() - stop_started.load(std::memory_order_relaxed));
}

void pause(const std::string& variant) {
  constexpr std::size_t n = 100'000;
  constexpr int collections = 15;
  std::vector<std::int64_t> stopped, whole;
  pauses = &stopped;
  // Installed first: the binding chains it (theirs run first), so every variant times the same.
  GC_set_on_collection_event(time_pause);
  auto** roots = static_cast<cell**>(GC_MALLOC(n * sizeof(cell*)));
  for (std::size_t i = 0; i < n; ++i) roots[i] = boehm_host::make_cell(i);
  gc::handle_table table;
  std::unique_ptr<boehm::collector_binding> binding;
  std::vector<gc::handle> handles;
  std::vector<void*> links;
  if (variant == "palrt") {
    binding = std::make_unique<boehm::collector_binding>(table);
    for (std::size_t i = 0; i < n; ++i) handles.push_back(table.allocate(gc::handle_kind::weak_short, roots[i]));
  } else if (variant == "boehm-links") {
    links.resize(n);  // malloc memory: Boehm does not scan it
    for (std::size_t i = 0; i < n; ++i) {
      links[i] = roots[i];
      GC_general_register_disappearing_link(&links[i], roots[i]);
    }
  }
  GC_gcollect();  // warm: the heap at its size
  stopped.clear();
  for (int c = 0; c < collections; ++c) {
    const std::int64_t t0 = now_ns();
    GC_gcollect();
    whole.push_back(now_ns() - t0);
  }
  pauses = nullptr;
  // Every weak reference still set: the objects were live throughout.
  std::size_t cleared = 0;
  for (gc::handle h : handles) cleared += table.gated_target(h) == nullptr;
  for (void* l : links) cleared += l == nullptr;
  if (cleared) std::fprintf(stderr, "palrt-boehm-bench: %zu weak references of live objects cleared\n", cleared);
  for (gc::handle h : handles) table.release(h);
  for (auto& l : links) GC_unregister_disappearing_link(&l);
  binding.reset();
  GC_reachable_here(roots);
  emit("boehm/pause/100k", variant, 1, "pause_ns", static_cast<double>(median(stopped)));
  emit("boehm/collection/100k", variant, 1, "collect_ns", static_cast<double>(median(whole)));
}

// --- hit ---
struct link_map {
  std::unordered_map<const void*, void*> wrappers;  // value: a Boehm short link to the wrapper
};
struct link_lookup {
  link_map* map;
  const void* native;
};
void* GC_CALLBACK find_under_lock(void* p) {
  auto* l = static_cast<link_lookup*>(p);
  auto it = l->map->wrappers.find(l->native);
  return it == l->map->wrappers.end() ? nullptr : it->second;
}

double hit(const std::string& variant, int threads) {
  constexpr int natives_count = 1024;
  constexpr int per_thread = 4'000'000;
  constexpr int hit_repetitions = 5;
  std::vector<int> natives(natives_count);
  auto** wrappers = static_cast<cell**>(GC_MALLOC(natives_count * sizeof(cell*)));
  for (int i = 0; i < natives_count; ++i) {
    wrappers[i] = boehm_host::make_cell(static_cast<std::uint64_t>(i));
    wrappers[i]->native = &natives[static_cast<std::size_t>(i)];
  }
  gc::handle_table table;
  std::unique_ptr<boehm::collector_binding> binding;
  std::unique_ptr<boehm::identity_cache> cache;
  link_map links;
  if (variant == "palrt") {
    binding = std::make_unique<boehm::collector_binding>(table);
    cache = std::make_unique<boehm::identity_cache>();
    binding->add_cache(*cache);
    for (int i = 0; i < natives_count; ++i) (void)cache->insert(&natives[static_cast<std::size_t>(i)], wrappers[i]);
  } else {
    links.wrappers.reserve(natives_count);
    for (int i = 0; i < natives_count; ++i) {
      auto [it, inserted] = links.wrappers.emplace(&natives[static_cast<std::size_t>(i)], wrappers[i]);
      GC_general_register_disappearing_link(&it->second, wrappers[i]);
    }
  }
  // Each repetition starts a fresh team (registration with Boehm outside the timed part) and
  // times from the release of the team to its last join; the median repetition is reported,
  // so that one preempted repetition on a busy 2-CPU machine does not make the figure.
  std::atomic<std::uint64_t> misses{0};
  std::vector<double> repetitions;
  for (int rep = 0; rep < hit_repetitions; ++rep) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t) {
      team.emplace_back([&, t] {
        boehm::scoped_thread_registration registration;
        std::uint32_t x = 2463534242u + static_cast<std::uint32_t>(t + rep * threads) * 7919u;
        std::uint64_t sink = 0, missed = 0;
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < per_thread; ++i) {
          x ^= x << 13;
          x ^= x >> 17;
          x ^= x << 5;
          const void* native = &natives[x % natives_count];
          void* w;
          if (cache) {
            w = cache->try_get(native);
          } else {
            link_lookup l{&links, native};
            w = GC_call_with_alloc_lock(find_under_lock, &l);
          }
          if (!w)
            ++missed;
          else
            sink += static_cast<cell*>(w)->id;
        }
        misses.fetch_add(missed);
        if (sink == 42) std::puts("");
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const std::int64_t t0 = now_ns();
    go.store(true, std::memory_order_release);
    for (auto& th : team) th.join();
    const std::int64_t t1 = now_ns();
    repetitions.push_back(static_cast<double>(t1 - t0) / (static_cast<double>(per_thread) * threads));
  }
  if (misses.load())
    std::fprintf(stderr, "palrt-boehm-bench: %llu lookups of live wrappers missed\n",
                 static_cast<unsigned long long>(misses.load()));
  if (cache) binding->remove_cache(*cache);
  for (auto& [native, link] : links.wrappers) GC_unregister_disappearing_link(&link);
  GC_reachable_here(wrappers);
  return median(repetitions);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"palrt-boehm-bench: one measurement of palrt inside a Boehm-collected process"};
  std::string which, variant;
  int threads = 1;
  app.add_option("--case", which, "weak-pair, pause or hit")
      ->required()
      ->check(CLI::IsMember({"weak-pair", "pause", "hit"}));
  app.add_option("--variant", variant, "palrt, boehm-links, or none (pause only)")
      ->required()
      ->check(CLI::IsMember({"palrt", "boehm-links", "none"}));
  app.add_option("--threads", threads, "threads (hit only)")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  if (variant == "none" && which != "pause") {
    std::fprintf(stderr, "palrt-boehm-bench: variant none is for the pause case only\n");
    return 2;
  }
  if (threads != 1 && which != "hit") {
    std::fprintf(stderr, "palrt-boehm-bench: --threads is for the hit case only\n");
    return 2;
  }
  GC_INIT();
  GC_allow_register_threads();
  if (which == "weak-pair")
    emit("boehm/weak-pair", variant, 1, "ns_per_op", weak_pair(variant));
  else if (which == "pause")
    pause(variant);
  else
    emit("boehm/hit", variant, threads, "ns_per_op", hit(variant, threads));
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "palrt-boehm-bench: cannot write the result to stdout\n");
    return 1;
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// post-ring-probe: how much of the sync manager's worker CPU per posted item is its cache-line
// transfers, and what packing items several to a line would buy (issue 27, item 3;
// docs/BENCHMARKS.md, "post's slow mode" and "Packing posted items").
//
// Not a palrt-bench case: a feasibility probe for a queue design palrt does not have, kept so
// that its figures can be reproduced. Build and run (release build):
//   ninja -C build tools/palrt-bench/post-ring-probe
//   build/tools/palrt-bench/post-ring-probe [seconds-per-round] [rounds]
// Two posting threads are pinned to one CPU and one consumer to another, as in
// `palrt-bench invoke --threads 2`'s post case; every posted item increments its poster's
// counter (release), as there, and each poster keeps at most 1024 items outstanding, reading
// its counter only when it reaches the limit. Variants, each in its own round, interleaved:
//   palrt-nodes   sync_manager::post at normal priority of a 16-byte callable: a 128-byte
//                 node per item, pushed on the inbox's stack, taken in lists by the worker (the
//                 consumer is palrt's worker, pinned by an invoke).
//   palrt-ring    the same with the 8-byte callable palrt-bench posts, which palrt now queues
//                 in its small-item ring (internal/post_ring.hpp): the design probed here.
//   spsc-xchg     one single-producer ring per poster, 16-byte entries {function, argument},
//                 4 per line; the consumer takes each entry with one exchange (so the first of
//                 a line asks for the line exclusive at once) and publishes its read position
//                 every 64 items.
//   spsc-load     the same, the consumer reading an entry and then clearing it (a shared copy
//                 first, then an upgrade to write it).
//   mpmc-xchg     one ring for all posters (a compare-exchange on its tail claims a slot, so
//                 items run in one order, the claims'), each entry's first word its position
//                 and kind: the consumer takes it with one exchange, which needs no expected
//                 value and leaves the slot marked taken for its position.
// The consumer of the ring variants spins; it loads before it exchanges only after it found
// its ring empty (a spinning exchange would take the line from the poster about to fill it).
// Printed per variant: items/s and the consumer's CPU ns per item (its CPU clock), median and
// range over the rounds, with the line-transfer time (bench_line_transfer.hpp) measured before
// and after the rounds.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <palrt/pal/thread_factory.hpp>
#include <palrt/sync/sync_manager.hpp>

#include "bench_affinity.hpp"
#include "bench_cpu_clock.hpp"
#include "bench_latency.hpp"
#include "bench_line_transfer.hpp"

namespace palrt::bench {
namespace {

constexpr std::uint64_t max_outstanding = 1024;  // per poster, as palrt-bench invoke's post
constexpr int posters = 2;
constexpr std::uint64_t publish_every = 64;  // the consumer's read position, for the posters
constexpr std::int64_t max_spin_ns = std::chrono::nanoseconds(sync::sync_manager::max_spin).count();

struct alignas(128) counter {
  std::atomic<std::uint64_t> value{0};
};

void bump(std::uintptr_t arg) noexcept {
  reinterpret_cast<std::atomic<std::uint64_t>*>(arg)->fetch_add(1, std::memory_order_release);
}
using item_fn = void (*)(std::uintptr_t) noexcept;

// --- Per-poster rings ----------------------------------------------------------------------

struct alignas(16) spsc_entry {
  std::atomic<std::uintptr_t> fn{0};  // 0: empty
  std::uintptr_t arg = 0;
};

struct spsc_ring {
  static constexpr std::uint64_t capacity = 4096;
  alignas(64) std::atomic<std::uint64_t> published_head{0};
  alignas(64) std::uint64_t tail = 0;  // the poster's
  std::uint64_t head_seen = 0;         // the poster's copy of published_head
  alignas(64) std::uint64_t head = 0;  // the consumer's
  bool idle = true;                    // the consumer's: last look found nothing
  alignas(64) std::array<spsc_entry, capacity> slots{};

  void post(item_fn fn, std::uintptr_t arg) noexcept {
    while (tail - head_seen >= capacity) {
      // acquire: the consumer's reads of the slots it passed come before our overwrites.
      head_seen = published_head.load(std::memory_order_acquire);
      if (tail - head_seen >= capacity) sched_yield();
    }
    spsc_entry& e = slots[tail & (capacity - 1)];
    e.arg = arg;
    // release: the argument with it.
    e.fn.store(reinterpret_cast<std::uintptr_t>(fn), std::memory_order_release);
    ++tail;
  }
  // Runs up to `most` items; how many.
  template <bool exchange>
  int take(int most) noexcept {
    int n = 0;
    for (; n < most; ++n) {
      spsc_entry& e = slots[head & (capacity - 1)];
      std::uintptr_t fn;
      if (idle && e.fn.load(std::memory_order_relaxed) == 0) break;
      if constexpr (exchange) {
        fn = e.fn.exchange(0, std::memory_order_acquire);  // acquire: the argument
      } else {
        fn = e.fn.load(std::memory_order_acquire);
        if (fn) e.fn.store(0, std::memory_order_relaxed);
      }
      if (!fn) {
        idle = true;
        break;
      }
      idle = false;
      reinterpret_cast<item_fn>(fn)(e.arg);
      if (++head % publish_every == 0) published_head.store(head, std::memory_order_release);
    }
    return n;
  }
};

// --- One ring for all posters ------------------------------------------------------------

// Entry word: position (48 bits) << 16 | kind. Full for position p: p's tag and a kind >= first.
struct mpmc_ring {
  static constexpr std::uint64_t capacity = 8192;
  static constexpr std::uint64_t taken = 1, first_kind = 2;
  static constexpr std::uint64_t pack(std::uint64_t pos, std::uint64_t kind) noexcept { return pos << 16 | kind; }
  static constexpr bool full_at(std::uint64_t word, std::uint64_t pos) noexcept {
    return (word >> 16) == (pos & ((std::uint64_t{1} << 48) - 1)) && (word & 0xffff) >= first_kind;
  }
  static inline const std::array<item_fn, 3> kinds{nullptr, nullptr, &bump};

  alignas(64) std::atomic<std::uint64_t> tail{0};
  alignas(64) std::atomic<std::uint64_t> published_head{0};
  alignas(64) std::uint64_t head = 0;
  bool idle = true;
  alignas(64) std::array<spsc_entry, capacity> slots{};

  // head_seen: the poster's own copy of published_head.
  void post(std::uint64_t kind, std::uintptr_t arg, std::uint64_t& head_seen) noexcept {
    std::uint64_t t = tail.load(std::memory_order_relaxed);
    for (;;) {
      if (t - head_seen >= capacity) {
        head_seen = published_head.load(std::memory_order_acquire);
        if (t - head_seen >= capacity) {
          sched_yield();
          t = tail.load(std::memory_order_relaxed);
          continue;
        }
      }
      // relaxed: the claim orders nothing; the entry's release store publishes.
      if (tail.compare_exchange_weak(t, t + 1, std::memory_order_relaxed, std::memory_order_relaxed)) break;
    }
    spsc_entry& e = slots[t & (capacity - 1)];
    e.arg = arg;
    e.fn.store(pack(t, kind), std::memory_order_release);
  }
  int take(int most) noexcept {
    int n = 0;
    for (; n < most; ++n) {
      spsc_entry& e = slots[head & (capacity - 1)];
      if (idle && !full_at(e.fn.load(std::memory_order_relaxed), head)) break;
      // acquire: the argument. Not published yet: the mark is overwritten by the publish.
      const std::uint64_t w = e.fn.exchange(pack(head, taken), std::memory_order_acquire);
      if (!full_at(w, head)) {
        idle = true;
        break;
      }
      idle = false;
      kinds[w & 0xffff](e.arg);
      if (++head % publish_every == 0) published_head.store(head, std::memory_order_release);
    }
    return n;
  }
};

// --- Driving a round -----------------------------------------------------------------------

struct round_result {
  double items_per_s = 0;
  double consumer_cpu_ns_per_item = 0;
};

// Runs `post(poster, counter)` on each poster for `seconds`, with the flow control, then
// waits for the drain. Returns items posted and the wall time.
std::pair<std::uint64_t, std::int64_t> drive(double seconds, int poster_cpu,
                                             const std::function<void(int, std::atomic<std::uint64_t>&)>& post,
                                             std::array<counter, posters>& done) {
  std::atomic<std::uint64_t> total{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::int64_t start = 0;
  std::vector<pal::managed_thread> threads;
  for (int p = 0; p < posters; ++p) {
    threads.push_back(pal::start_thread({"probe-poster"}, [&, p] {
      pin_current_thread(poster_cpu);
      std::atomic<std::uint64_t>& executed = done[static_cast<std::size_t>(p)].value;
      const std::uint64_t base = executed.load(std::memory_order_relaxed);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) sched_yield();
      const std::int64_t end = now_ns() + static_cast<std::int64_t>(seconds * 1e9);
      std::uint64_t posted = 0, seen = base;
      while (now_ns() < end) {
        for (int i = 0; i < 16; ++i) {
          while (posted - (seen - base) >= max_outstanding) {
            seen = executed.load(std::memory_order_relaxed);
            if (posted - (seen - base) >= max_outstanding) sched_yield();
          }
          post(p, executed);
          ++posted;
        }
      }
      while (executed.load(std::memory_order_acquire) - base < posted) sched_yield();
      total.fetch_add(posted);
    }));
  }
  while (ready.load() < posters) sched_yield();
  start = now_ns();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  return {total.load(), now_ns() - start};
}

template <class Ring, class Post, class Take>
round_result ring_round(double seconds, int poster_cpu, int consumer_cpu, Post post_fn, Take take_fn) {
  auto rings = std::make_unique<Ring>();
  std::array<counter, posters> done{};
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> consumer_cpu_ns{0};
  pal::managed_thread consumer = pal::start_thread({"probe-consumer"}, [&] {
    pin_current_thread(consumer_cpu);
    const std::int64_t cpu0 = this_thread_cpu_time().count();
    // Out of work for longer than palrt's worker spins (sync_manager::max_spin), it sleeps a
    // little, as that worker parks: its CPU time is then the items', not a spin between rounds
    // or while the posters are off their CPU. Saturated, it never gets there.
    std::int64_t idle_since = -1;
    while (!stop.load(std::memory_order_relaxed)) {
      if (take_fn(*rings) > 0) {
        idle_since = -1;
      } else if (idle_since < 0) {
        idle_since = now_ns();
      } else if (now_ns() - idle_since > max_spin_ns) {
        const timespec nap{0, 50'000};
        ::nanosleep(&nap, nullptr);
        idle_since = -1;
      }
    }
    consumer_cpu_ns.store(this_thread_cpu_time().count() - cpu0);
  });
  const auto [items, wall] = drive(
      seconds, poster_cpu, [&](int p, std::atomic<std::uint64_t>& executed) { post_fn(*rings, p, executed); }, done);
  stop.store(true);
  consumer.join();
  return {static_cast<double>(items) * 1e9 / static_cast<double>(wall),
          static_cast<double>(consumer_cpu_ns.load()) / static_cast<double>(items)};
}

struct spsc_pair {
  std::array<spsc_ring, posters> ring;
};

template <bool exchange>
int take_spsc(spsc_pair& r) {
  int n = 0;
  for (auto& ring : r.ring) n += ring.template take<exchange>(64);
  return n;
}

struct mpmc_with_heads {
  mpmc_ring ring;
  std::array<std::uint64_t, posters> head_seen{};  // each poster's own, on its own line below
};

// small: posts the 8-byte callable palrt-bench posts (the ring); otherwise the same padded to
// 16 bytes (a node).
round_result palrt_round(double seconds, int poster_cpu, int consumer_cpu, bool small) {
  sync::sync_manager manager;
  manager.ensure_worker_started();
  const clockid_t worker_clock = manager.invoke(sync::work_priority::normal, [consumer_cpu] {
    pin_current_thread(consumer_cpu);
    return this_thread_cpu_clock();
  });
  std::array<counter, posters> done{};
  const auto post = [&](int, std::atomic<std::uint64_t>& executed) {
    if (small) {
      manager.post(sync::work_priority::normal, [&executed] { executed.fetch_add(1, std::memory_order_release); });
    } else {
      manager.post(sync::work_priority::normal,
                   [&executed, one = std::uint64_t{1}] { executed.fetch_add(one, std::memory_order_release); });
    }
  };
  // Warm the pool to its steady size, as palrt-bench's warm-up slice does.
  (void)drive(seconds / 10, poster_cpu, post, done);
  const std::int64_t cpu0 = cpu_time(worker_clock).count();
  const auto [items, wall] = drive(seconds, poster_cpu, post, done);
  const std::int64_t cpu = cpu_time(worker_clock).count() - cpu0;
  (void)manager.stop();
  return {static_cast<double>(items) * 1e9 / static_cast<double>(wall),
          static_cast<double>(cpu) / static_cast<double>(items)};
}

std::string summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  char text[96];
  std::snprintf(text, sizeof text, "%8.1f (%.1f-%.1f)", v[v.size() / 2], v.front(), v.back());
  return text;
}

int run(double seconds, int rounds) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) {
    std::fprintf(stderr, "post-ring-probe: needs two allowed CPUs (has %zu)\n", cpus.size());
    return 1;
  }
  const int poster_cpu = cpus[0], consumer_cpu = cpus[1];
  const std::optional<double> before = line_transfer_ns(poster_cpu, consumer_cpu, 100);
  struct variant {
    const char* name;
    std::function<round_result()> round;
    std::vector<double> rate, cpu;
  };
  std::vector<variant> variants;
  variants.push_back({"palrt-nodes", [&] { return palrt_round(seconds, poster_cpu, consumer_cpu, false); }, {}, {}});
  variants.push_back({"palrt-ring", [&] { return palrt_round(seconds, poster_cpu, consumer_cpu, true); }, {}, {}});
  variants.push_back({"spsc-xchg",
                      [&] {
                        return ring_round<spsc_pair>(
                            seconds, poster_cpu, consumer_cpu,
                            [](spsc_pair& r, int p, std::atomic<std::uint64_t>& c) {
                              r.ring[static_cast<std::size_t>(p)].post(&bump, reinterpret_cast<std::uintptr_t>(&c));
                            },
                            take_spsc<true>);
                      },
                      {},
                      {}});
  variants.push_back({"spsc-load",
                      [&] {
                        return ring_round<spsc_pair>(
                            seconds, poster_cpu, consumer_cpu,
                            [](spsc_pair& r, int p, std::atomic<std::uint64_t>& c) {
                              r.ring[static_cast<std::size_t>(p)].post(&bump, reinterpret_cast<std::uintptr_t>(&c));
                            },
                            take_spsc<false>);
                      },
                      {},
                      {}});
  variants.push_back({"mpmc-xchg",
                      [&] {
                        return ring_round<mpmc_with_heads>(
                            seconds, poster_cpu, consumer_cpu,
                            [](mpmc_with_heads& r, int p, std::atomic<std::uint64_t>& c) {
                              r.ring.post(2, reinterpret_cast<std::uintptr_t>(&c),
                                          r.head_seen[static_cast<std::size_t>(p)]);
                            },
                            [](mpmc_with_heads& r) { return r.ring.take(64); });
                      },
                      {},
                      {}});
  for (int r = 0; r < rounds; ++r) {
    for (variant& v : variants) {
      const round_result res = v.round();
      v.rate.push_back(res.items_per_s / 1e6);
      v.cpu.push_back(res.consumer_cpu_ns_per_item);
    }
  }
  const std::optional<double> after = line_transfer_ns(poster_cpu, consumer_cpu, 100);
  std::printf("post-ring-probe: %d posters on CPU %d, consumer on CPU %d, %d rounds of %.2f s\n", posters, poster_cpu,
              consumer_cpu, rounds, seconds);
  std::printf("line transfer: %.1f ns before, %.1f ns after\n", before.value_or(-1), after.value_or(-1));
  std::printf("%-12s %-26s %s\n", "variant", "M items/s median (range)", "consumer CPU ns/item median (range)");
  for (variant& v : variants) std::printf("%-12s %-26s %s\n", v.name, summary(v.rate).c_str(), summary(v.cpu).c_str());
  return 0;
}

}  // namespace
}  // namespace palrt::bench

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (seconds <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: post-ring-probe [seconds-per-round > 0] [rounds > 0]\n");
    return 2;
  }
  return palrt::bench::run(seconds, rounds);
}

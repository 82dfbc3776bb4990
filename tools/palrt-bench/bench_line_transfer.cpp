// SPDX-License-Identifier: MIT
// The cache-line transfer probe (bench_line_transfer.hpp says why a benchmark needs it).
#include "bench_line_transfer.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <palrt/pal/thread_factory.hpp>

#include "bench_affinity.hpp"
#include "bench_latency.hpp"

namespace palrt::bench {

std::optional<double> line_transfer_ns(int cpu_a, int cpu_b, int batches) {
  constexpr std::int64_t round_trips = 1000;
  const std::int64_t turns = 2 * round_trips * batches;
  // The ball: odd values are the partner's turn to answer, even values ours to serve.
  struct alignas(64) line {
    std::atomic<std::int64_t> ball{0};
  };
  line l;
  std::atomic<bool> partner_pinned{false};
  std::atomic<bool> partner_ready{false};
  pal::managed_thread partner = pal::start_thread({"bench-transfer"}, [&] {
    // release: the flag before `ready`, which the server acquires.
    partner_pinned.store(pin_current_thread(cpu_b), std::memory_order_relaxed);
    partner_ready.store(true, std::memory_order_release);
    // Answers every serve, until the server stops serving (the last serve, `turns - 1`); one
    // answer even if the server gave up at once (ball -1).
    for (std::int64_t expect = 1; expect < turns; expect += 2) {
      std::int64_t seen;
      // acquire/release: the ball is the only data; the orderings keep the hand-off honest
      // (a store-load pair the compiler may not fold), not to publish anything else.
      while ((seen = l.ball.load(std::memory_order_acquire)) != expect) {
        if (seen < 0) return;
      }
      l.ball.store(expect + 1, std::memory_order_release);
    }
  });
  const bool pinned = pin_current_thread(cpu_a);
  while (!partner_ready.load(std::memory_order_acquire)) {
  }
  if (!pinned || !partner_pinned.load(std::memory_order_relaxed)) {
    l.ball.store(-1, std::memory_order_release);
    partner.join();
    return std::nullopt;
  }
  std::vector<double> per_batch;
  per_batch.reserve(static_cast<std::size_t>(batches));
  std::int64_t ball = 0;
  for (int b = 0; b < batches; ++b) {
    const std::int64_t t0 = now_ns();
    for (std::int64_t i = 0; i < round_trips; ++i) {
      l.ball.store(ball + 1, std::memory_order_release);
      ball += 2;
      while (l.ball.load(std::memory_order_acquire) != ball) {
      }
    }
    per_batch.push_back(static_cast<double>(now_ns() - t0) / (2.0 * round_trips));
  }
  partner.join();
  std::nth_element(per_batch.begin(), per_batch.begin() + static_cast<std::ptrdiff_t>(per_batch.size() / 2),
                   per_batch.end());
  return per_batch[per_batch.size() / 2];
}

int line_transfer_batches(const bench_settings& settings) noexcept {
  return settings.smoke ? 3 : settings.quick ? 20 : 100;
}

void report_line_transfer(bench_report& report, const bench_settings& settings, const std::vector<int>& cpus,
                          const std::string& metric, int threads) {
  if (cpus.size() < 2) return;
  const std::optional<double> ns = line_transfer_ns(cpus[0], cpus[1], line_transfer_batches(settings));
  if (!ns) return;
  report.add({"line-transfer", "machine", threads, metric, *ns});
  char text[96];
  std::snprintf(text, sizeof text, "line transfer between CPUs %d and %d (%s): %.1f ns", cpus[0], cpus[1],
                metric.c_str(), *ns);
  report.progress(text);
}

std::string line_transfer_description(const std::string& cases) {
  return "not palrt's: the machine's. The one-way time of a cache line between the two CPUs the 2-thread " + cases +
         " run on, just before them (before_ns) and just after them (after_ns): two threads pinned there hand a "
         "counter back and forth; the median of batches of 1000 round trips. On a virtual machine the hypervisor's "
         "placement of the vCPUs sets it (docs/BENCHMARKS.md, \"post's slow mode\"), and every line the threads "
         "share costs that much per transfer: read the 2-thread figures against it. Only with two CPUs or more.";
}

}  // namespace palrt::bench

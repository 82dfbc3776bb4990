// SPDX-License-Identifier: MIT
// Latencies for palrt-bench's p50_ns / p99_ns metrics: a time stamp in nanoseconds and a
// histogram to collect many of them without allocating or sorting.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "bench_timing.hpp"

namespace palrt::bench {

// bench_clock's time as a number, for stamps stored in objects and atomics.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(bench_clock::now().time_since_epoch()).count();
}

// Latencies, one writer at a time: 16 buckets per power of two (a value is reported as its
// bucket's middle, within 3%), exact below 16 ns. 8 KiB, no allocation: one per writing
// thread, merged by whoever reports once the writers are done.
class latency_histogram {
 public:
  void record(std::int64_t ns) noexcept {
    const std::uint64_t v = ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
    ++counts_[bucket_of(v)];
    ++total_;
  }
  void merge(const latency_histogram& other) noexcept {
    for (std::size_t b = 0; b < counts_.size(); ++b) counts_[b] += other.counts_[b];
    total_ += other.total_;
  }
  void reset() noexcept {
    counts_.fill(0);
    total_ = 0;
  }
  std::uint64_t total() const noexcept { return total_; }
  // The value at quantile q (0..1]: NaN if nothing was recorded.
  double quantile(double q) const noexcept {
    if (total_ == 0) return NAN;
    const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total_)));
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < counts_.size(); ++b) {
      seen += counts_[b];
      if (seen >= std::max<std::uint64_t>(rank, 1)) return middle_of(b);
    }
    return middle_of(counts_.size() - 1);
  }

 private:
  static constexpr int sub_bits = 4;
  static std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < (1u << sub_bits)) return static_cast<std::size_t>(v);
    const int msb = 63 - std::countl_zero(v);
    const std::uint64_t sub = (v >> (msb - sub_bits)) & ((1u << sub_bits) - 1);
    return (static_cast<std::size_t>(msb - sub_bits + 1) << sub_bits) + static_cast<std::size_t>(sub);
  }
  static double middle_of(std::size_t b) noexcept {
    if (b < (1u << sub_bits)) return static_cast<double>(b);
    const int msb = static_cast<int>(b >> sub_bits) + sub_bits - 1;
    const double width = std::ldexp(1.0, msb - sub_bits);
    const double lower = static_cast<double>((1u << sub_bits) + (b & ((1u << sub_bits) - 1))) * width;
    return lower + width / 2;
  }
  std::array<std::uint64_t, 64 << sub_bits> counts_{};
  std::uint64_t total_ = 0;
};

}  // namespace palrt::bench

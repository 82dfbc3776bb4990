// SPDX-License-Identifier: MIT
// How the identity caches' bucket hash (palrt/interop/internal/bucket_hash.hpp) spreads
// pointers, measured: what the caches' users rely on, and why the hash is there.
//
// - An allocator hands out arithmetic progressions of aligned addresses; Fibonacci hashing
//   spreads them almost perfectly (the three-distance theorem: the hashes i * stride * 2^64/phi
//   are as evenly spaced as n points can be), so every bucket gets n/k within 1%.
// - Random addresses land uniformly: chi-square over 20 independent trials per bucket count
//   behaves as the chi-square distribution with k - 1 degrees of freedom says it should.
// - The controls: masking the low bits puts every aligned key in one bucket, and pybind11's
//   shard function, by design, gives every key of one MiB the same shard.
// - Inside a bucket, the first probe slot comes from the bits just below the bucket's, so keys
//   that share a bucket do not collide again in its table.
//
// Deterministic: fixed keys, fixed seeds. Every figure is printed (MESSAGE) so a reader sees
// the margins, not just a pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "palrt/interop/internal/bucket_hash.hpp"

using namespace palrt::interop::internal;

namespace {

constexpr std::size_t key_count = 200'000;
// A realistic heap address in the mmap region of x86-64 Linux, 64 KiB aligned.
constexpr std::uintptr_t heap_base = 0x7f3a12340000;
constexpr std::size_t strides[] = {16, 32, 64, 96};
constexpr std::size_t bucket_counts[] = {16, 64, 128};

std::vector<const void*> arithmetic_keys(std::size_t stride) {
  std::vector<const void*> keys(key_count);
  for (std::size_t i = 0; i < key_count; ++i) keys[i] = reinterpret_cast<const void*>(heap_base + i * stride);
  return keys;
}

// 16-byte aligned addresses drawn uniformly from user space (above the first 64 KiB, below
// the 47-bit limit of x86-64's lower half).
std::vector<const void*> random_keys(std::mt19937_64& rng) {
  std::uniform_int_distribution<std::uintptr_t> address(0x10000, (std::uintptr_t{1} << 47) - 1);
  std::vector<const void*> keys(key_count);
  for (auto& key : keys) key = reinterpret_cast<const void*>(address(rng) & ~std::uintptr_t{15});
  return keys;
}

unsigned bits_of(std::size_t k) { return static_cast<unsigned>(std::countr_zero(k)); }

std::vector<std::size_t> hashed_counts(const std::vector<const void*>& keys, std::size_t k) {
  std::vector<std::size_t> counts(k);
  for (const void* key : keys) ++counts[bucket_of(fibonacci_hash(key), bits_of(k))];
  return counts;
}

double chi_square(const std::vector<std::size_t>& counts, std::size_t n) {
  const double expected = static_cast<double>(n) / static_cast<double>(counts.size());
  double sum = 0;
  for (std::size_t c : counts)
    sum += (static_cast<double>(c) - expected) * (static_cast<double>(c) - expected) / expected;
  return sum;
}

// The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a), after
// Numerical Recipes (gammq): the series for P = 1 - Q below x = a + 1, where it converges
// fast, and Lentz's continued fraction for Q above. Accurate to ~1e-12 here.
double upper_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefactor = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10'000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(log_prefactor);
  }
  constexpr double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10'000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefactor) * h;
}

// The probability that a chi-square variable with `df` degrees of freedom exceeds `x`.
double chi_square_p_value(double x, double df) { return upper_gamma_q(df / 2, x / 2); }

// Q(n, x) for a whole n in closed form: e^-x * sum_{j<n} x^j / j! (the Poisson tail).
double poisson_q(int n, double x) {
  double term = std::exp(-x), sum = 0;
  for (int j = 0; j < n; ++j) {
    sum += term;
    term *= x / (j + 1);
  }
  return sum;
}

// Q(n + 1/2, x) in closed form: erfc(sqrt x) + e^-x * sum_{j=1..n} x^(j-1/2) / Gamma(j + 1/2).
// The tests' degrees of freedom (15, 63, 127) are odd, so their a = df/2 are of this kind.
double half_integer_q(int n, double x) {
  double sum = std::erfc(std::sqrt(x));
  for (int j = 1; j <= n; ++j) sum += std::exp(-x + (j - 0.5) * std::log(x) - std::lgamma(j + 0.5));
  return sum;
}

}  // namespace

TEST_CASE("identity hash: the incomplete gamma function matches closed forms and chi-square tables") {
  // Both branches (series below a + 1, continued fraction above) against closed forms.
  for (int n : {1, 2, 8, 32, 64}) {
    for (double x : {0.5, 3.0, 7.5, 20.0, 40.0, 70.0, 100.0}) {
      CAPTURE(n);
      CAPTURE(x);
      CHECK(upper_gamma_q(n, x) == doctest::Approx(poisson_q(n, x)).epsilon(1e-9).scale(0));
    }
  }
  for (int n : {0, 7, 31, 63}) {
    for (double x : {0.3, 4.0, 30.0, 64.0, 90.0}) {
      CAPTURE(n);
      CAPTURE(x);
      CHECK(upper_gamma_q(n + 0.5, x) == doctest::Approx(half_integer_q(n, x)).epsilon(1e-9).scale(0));
    }
  }
  CHECK(upper_gamma_q(4, 0) == 1.0);
  // The 5% and 95% points of the chi-square distribution for the tests' degrees of freedom
  // (15 df: 24.996 and 7.261, as printed tables give them; 63 and 127 df from the closed form
  // above, by bisection): the p-values must come back as 0.05 and 0.95.
  CHECK(chi_square_p_value(24.9958, 15) == doctest::Approx(0.05).epsilon(1e-4));
  CHECK(chi_square_p_value(7.2609, 15) == doctest::Approx(0.95).epsilon(1e-4));
  CHECK(chi_square_p_value(82.5287, 63) == doctest::Approx(0.05).epsilon(1e-4));
  CHECK(chi_square_p_value(45.7414, 63) == doctest::Approx(0.95).epsilon(1e-4));
  CHECK(chi_square_p_value(154.3015, 127) == doctest::Approx(0.05).epsilon(1e-4));
  CHECK(chi_square_p_value(101.9706, 127) == doctest::Approx(0.95).epsilon(1e-4));
}

TEST_CASE("identity hash: an allocator's aligned progressions fill every bucket within 1% of n/k") {
  for (std::size_t stride : strides) {
    const std::vector<const void*> keys = arithmetic_keys(stride);
    for (std::size_t k : bucket_counts) {
      const std::vector<std::size_t> counts = hashed_counts(keys, k);
      const double expected = static_cast<double>(key_count) / static_cast<double>(k);
      const auto [low, high] = std::minmax_element(counts.begin(), counts.end());
      const double worst =
          std::max(expected - static_cast<double>(*low), static_cast<double>(*high) - expected) / expected;
      MESSAGE("stride " << stride << ", k = " << k << ": buckets hold " << *low << ".." << *high << " keys (n/k = "
                        << expected << ", worst " << 100 * worst << "%), chi-square " << chi_square(counts, key_count));
      CAPTURE(stride);
      CAPTURE(k);
      CHECK(worst <= 0.01);
    }
  }
}

TEST_CASE("identity hash: random aligned addresses land uniformly (chi-square over 20 trials per bucket count)") {
  // One generator for the whole test, fixed seed: trials are independent draws, and every run
  // sees the same ones. The control is the same hash with 1 key in 100 sent to bucket 0
  // instead, a 1% bias: the same statistics must reject it, or they prove nothing.
  constexpr int trials = 20;
  std::mt19937_64 rng(0x5eed'1d3a'7f3a'1234);
  std::vector<std::vector<double>> chi(std::size(bucket_counts)), control(std::size(bucket_counts));
  for (int t = 0; t < trials; ++t) {
    const std::vector<const void*> keys = random_keys(rng);
    for (std::size_t i = 0; i < std::size(bucket_counts); ++i) {
      const std::size_t k = bucket_counts[i];
      chi[i].push_back(chi_square(hashed_counts(keys, k), key_count));
      std::vector<std::size_t> biased(k);
      for (std::size_t j = 0; j < keys.size(); ++j)
        ++biased[j % 100 == 0 ? 0 : bucket_of(fibonacci_hash(keys[j]), bits_of(k))];
      control[i].push_back(chi_square(biased, key_count));
    }
  }
  struct verdict {
    double mean = 0, off_by_sd = 0;
    int central = 0;  // p-values in [0.05, 0.95]
    std::string p_values;
  };
  const auto judge = [](const std::vector<double>& chis, double df) {
    verdict v;
    std::ostringstream p_values;
    for (double x : chis) {
      v.mean += x / trials;
      const double p = chi_square_p_value(x, df);
      v.central += p >= 0.05 && p <= 0.95;
      p_values << ' ' << std::round(p * 1000) / 1000;
    }
    // Under uniformity a chi-square has mean k - 1 and variance 2(k - 1): the mean of 20 has
    // standard deviation sqrt(2(k - 1) / 20).
    v.off_by_sd = (v.mean - df) / std::sqrt(2 * df / trials);
    v.p_values = p_values.str();
    return v;
  };
  for (std::size_t i = 0; i < std::size(bucket_counts); ++i) {
    const std::size_t k = bucket_counts[i];
    const double df = static_cast<double>(k - 1);
    const verdict hashed = judge(chi[i], df), biased = judge(control[i], df);
    MESSAGE("k = " << k << ": mean chi-square " << hashed.mean << " (expected " << df << ", off by " << hashed.off_by_sd
                   << " sd of the mean); " << hashed.central << " of 20 p-values in [0.05, 0.95]:" << hashed.p_values
                   << "\n  control (1% bias): mean " << biased.mean << ", off by " << biased.off_by_sd << " sd; "
                   << biased.central << " of 20 p-values in [0.05, 0.95]");
    CAPTURE(k);
    // 4 sd: a uniform hash fails this with probability ~6e-5. 18 of 20 central p-values are
    // expected, and fewer than 14 has probability ~0.002 under uniformity.
    CHECK(std::fabs(hashed.off_by_sd) <= 4);
    CHECK(hashed.central >= 14);
    CHECK(biased.off_by_sd > 4);
    CHECK(biased.central < 14);
  }
}

TEST_CASE("identity hash: masking the low bits puts every aligned key in one of 16 buckets (why the hash exists)") {
  constexpr std::size_t k = 16;
  for (std::size_t stride : strides) {
    const std::vector<const void*> keys = arithmetic_keys(stride);
    std::vector<std::size_t> masked(k);
    for (const void* key : keys) ++masked[masked_bucket_of(key, k)];
    const std::vector<std::size_t> hashed = hashed_counts(keys, k);
    const auto used = [](const std::vector<std::size_t>& counts) {
      return std::count_if(counts.begin(), counts.end(), [](std::size_t c) { return c > 0; });
    };
    MESSAGE("stride " << stride << ", k = 16: masked, " << used(masked) << " bucket(s) used, chi-square "
                      << chi_square(masked, key_count) << "; hashed, " << used(hashed) << " used, chi-square "
                      << chi_square(hashed, key_count));
    CAPTURE(stride);
    // Every multiple of 16 has the same low 4 bits: one bucket holds everything.
    CHECK(*std::max_element(masked.begin(), masked.end()) == key_count);
    CHECK(chi_square(masked, key_count) == doctest::Approx(static_cast<double>(key_count) * (k - 1)));
    CHECK(used(hashed) == static_cast<std::ptrdiff_t>(k));
  }
}

TEST_CASE("identity hash: pybind11's shard function ignores the low 20 bits, so one MiB of objects shares a shard") {
  // pybind11 shards by splitmix64(address >> 20) on purpose (objects of one arena stay
  // together). 200,000 objects 16 bytes apart span about 3 MiB: a handful of distinct inputs,
  // hence a handful of the 16 shards, however good splitmix64 is.
  constexpr std::size_t shard_mask = 15;
  for (std::size_t stride : strides) {
    const std::vector<const void*> keys = arithmetic_keys(stride);
    std::set<std::uintptr_t> mebibytes;
    std::vector<std::size_t> shards(shard_mask + 1);
    bool same_mebibyte_same_shard = true;
    for (const void* key : keys) {
      const std::uintptr_t mib = reinterpret_cast<std::uintptr_t>(key) >> 20;
      mebibytes.insert(mib);
      ++shards[pybind11_shard(key, shard_mask)];
      same_mebibyte_same_shard &=
          pybind11_shard(key, shard_mask) == pybind11_shard(reinterpret_cast<const void*>(mib << 20), shard_mask);
    }
    const auto used = std::count_if(shards.begin(), shards.end(), [](std::size_t c) { return c > 0; });
    MESSAGE("stride " << stride << ": keys span " << (key_count - 1) * stride / 1024.0 / 1024.0 << " MiB, "
                      << mebibytes.size() << " distinct inputs to splitmix64, " << used
                      << " of 16 shards used, chi-square " << chi_square(shards, key_count));
    CAPTURE(stride);
    CHECK(same_mebibyte_same_shard);
    CHECK(static_cast<std::size_t>(used) <= mebibytes.size());
    if (stride == 16) {
      CHECK(mebibytes.size() <= 4);
      CHECK(used <= 4);
    }
  }
}

TEST_CASE(
    "identity hash: keys that share a bucket spread over its table's slots (the slot bits are not the bucket's)") {
  // first_slot_of takes the 6 bits just below the bucket's: for the keys of one bucket they
  // still vary. A control takes the top 6 bits instead, which overlap the bucket's bits: for
  // k >= 64 all keys of a bucket then start at one slot.
  constexpr unsigned slot_bits = 6;
  constexpr std::size_t slots = std::size_t{1} << slot_bits;
  std::mt19937_64 rng(0x51075);
  std::vector<std::pair<std::string, std::vector<const void*>>> key_sets;
  for (std::size_t stride : strides) key_sets.emplace_back("stride " + std::to_string(stride), arithmetic_keys(stride));
  key_sets.emplace_back("random", random_keys(rng));
  for (const auto& [name, keys] : key_sets) {
    for (std::size_t k : bucket_counts) {
      const unsigned bits = bits_of(k);
      std::vector<std::vector<std::size_t>> per_bucket(k, std::vector<std::size_t>(slots));
      std::vector<std::vector<std::size_t>> control(k, std::vector<std::size_t>(slots));
      for (const void* key : keys) {
        const std::uint64_t h = fibonacci_hash(key);
        ++per_bucket[bucket_of(h, bits)][first_slot_of(h, bits, slot_bits)];
        ++control[bucket_of(h, bits)][h >> (64 - slot_bits)];
      }
      double worst_ratio = 0, control_ratio = 0;  // fullest slot / its fair share, over all buckets
      for (std::size_t b = 0; b < k; ++b) {
        std::size_t in_bucket = 0;
        for (std::size_t c : per_bucket[b]) in_bucket += c;
        const double share = static_cast<double>(in_bucket) / slots;
        worst_ratio = std::max(
            worst_ratio, static_cast<double>(*std::max_element(per_bucket[b].begin(), per_bucket[b].end())) / share);
        control_ratio = std::max(control_ratio,
                                 static_cast<double>(*std::max_element(control[b].begin(), control[b].end())) / share);
      }
      MESSAGE(name << ", k = " << k << ": fullest first slot holds " << worst_ratio << "x its share (about "
                   << key_count / k / slots << " keys); with the bucket's own bits it would hold " << control_ratio
                   << "x");
      CAPTURE(name);
      CAPTURE(k);
      CHECK(worst_ratio <= 3.0);
      if (k >= slots) CHECK(control_ratio == doctest::Approx(static_cast<double>(slots)));  // the control does fail
    }
  }
}

// SPDX-License-Identifier: MIT
// How the identity caches pick a bucket for a pointer.
//
// Native objects are heap-allocated and at least 16-byte aligned, so the low bits of their
// addresses are constant: masking an address puts every object in one bucket. palrt
// multiplies by 2^64 / phi and takes the high bits instead (Fibonacci, or multiply-shift,
// hashing: a multiply and a shift), which spreads an allocator's arithmetic progressions
// almost perfectly and random addresses uniformly (tests/test_identity_hash.cpp measures
// both). The bits just below the bucket's index pick the first slot inside the bucket's
// table, so keys that share a bucket do not collide again inside it.
//
// pybind11_shard() is the pybind11 design the benchmark compares against, written from its
// description: splitmix64 of the address shifted right by 20 (objects of one allocator
// arena share a shard on purpose), masked.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "palrt/interop/detail/identity_fast_path.hpp"

namespace palrt::interop::internal {

// fibonacci_hash, bucket_of and first_slot_of live with the inline hit path.
using detail::bucket_of;
using detail::fibonacci_hash;
using detail::fibonacci_multiplier;
using detail::first_slot_of;

// What the hash is there to avoid: the address's low bits.
inline std::size_t masked_bucket_of(const void* p, std::size_t buckets) noexcept {
  return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(p) & (buckets - 1));
}

inline std::uint64_t splitmix64(std::uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline std::size_t pybind11_shard(const void* p, std::size_t shard_mask) noexcept {
  return static_cast<std::size_t>(splitmix64(reinterpret_cast<std::uintptr_t>(p) >> 20) & shard_mask);
}

// RoundUpToPowerOf2, at least 1.
inline std::size_t round_up_to_power_of_two(std::size_t n) noexcept { return n <= 1 ? 1 : std::bit_ceil(n); }

}  // namespace palrt::interop::internal

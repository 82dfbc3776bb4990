// SPDX-License-Identifier: MIT
// palrt-bench cache: what the cache cases (bench_cache.cpp, bench_cache_sustained.cpp) and the
// peers' translation units (bench_cache_tbb.cpp, bench_cache_libcuckoo.cpp,
// bench_cache_rculfhash.cpp) share: the identities, the wrapper every variant caches, what a
// lookup does with the wrapper it found, and the one loop every hit variant is timed in.
//
// Each peer lives in a file of its own, so that its headers (and liburcu's _LGPL_SOURCE)
// stay there, and builds its variant by instantiating hit_variant() with its lookup: the
// loop is compiled once per variant with the lookup inlined into it, as for the
// identity_cache variants, and every variant runs the same loop around a different lookup.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <palrt/interop/identity_cache.hpp>
#include <palrt/interop/internal/bucket_hash.hpp>
#include <palrt/interop/internal/cache_state.hpp>
#include <palrt/startup/internal/baselines.hpp>  // the cache designs measured
#include <palrt/interop/wrapper_object.hpp>
#include <palrt/gc/collector.hpp>
#include <palrt/gc/finalizer_thread.hpp>
#include <palrt/gc/handle_table.hpp>
#include <palrt/gc/object.hpp>

#include "bench_component.hpp"
#include "bench_thread_team.hpp"
#include "bench_timing.hpp"

namespace palrt::bench {
class bench_report;
}

namespace palrt::bench::cache {

// The runtime a cache works in: a handle table, its collector and a running finalizer thread
// (which finalizes the wrappers' records, and so removes the entries of dead wrappers).
struct runtime {
  explicit runtime(gc::collector_options options = {});
  // Settles (below), then stops the finalizer thread.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Collects and waits for the finalizer until a collection finds nothing dead: dropped
  // wrappers are freed, their records finalized (their entries removed) and freed.
  void settle();

  gc::handle_table table;
  gc::collector gc;
  gc::finalizer_thread finalizer;
};

using interop::internal::cache_design;
using interop::internal::cache_design_name;
// The four designs of identity_cache: palrt's and the three it is measured against, in the
// order of the table's columns (palrt first).
inline constexpr cache_design cache_designs[] = {cache_design::palrt, cache_design::bucketed_rwlock,
                                                 cache_design::single_lock, cache_design::pybind11_shards};

// A cache of `design` (palrt's own identity_cache for cache_design::palrt).
inline interop::identity_cache make_cache(gc::collector& c, cache_design design, interop::cache_options o = {}) {
  return interop::internal::identity_cache_access::make(c, design, std::move(o));
}
inline const char* design_name(const interop::identity_cache& c) {
  return cache_design_name(interop::internal::identity_cache_access::design(c));
}

// Case `sustained` (bench_cache_sustained.cpp): the four designs with `threads` mutators.
void run_sustained(const bench_settings& settings, bench_report& report, int threads);

// A native object whose address is an identity, like a COM object behind a pointer: 16
// bytes, allocated on its own with new. The sustained case keeps the times its wrapper was
// dropped and its entry removed in it (the cache's on_removed callback hands back the
// identity, so it finds them without a lookup of its own).
//
// The hit cases' `no-map` control keeps its wrapper's address in it (direct): the same loop
// with the map taken out, so that its 2-thread scaling shows what this machine allows.
struct native_object {
  std::atomic<std::int64_t> dropped_ns{0};
  std::atomic<std::int64_t> removed_ns{0};
  std::atomic<const void*> direct{nullptr};
};
static_assert(sizeof(native_object) == 24, "a native identity is a small heap object");

// `count` native objects, each a heap allocation of its own (so their addresses are what an
// allocator hands out), and their addresses as identities.
struct identity_pool {
  explicit identity_pool(std::size_t count) {
    objects.reserve(count);
    identities.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      objects.push_back(std::make_unique<native_object>());
      identities.push_back(objects.back().get());
    }
  }
  std::vector<std::unique_ptr<native_object>> objects;
  std::vector<const void*> identities;
};

// The wrapper's own fields, in a base so that they sit right after the object's header (on
// its cache line, which a lookup touches anyway: palrt's find() checks the count there).
struct wrapper_fields {
  explicit wrapper_fields(const void* native) noexcept : identity(native) {}
  const void* const identity;
};

// The managed wrapper of an identity, the same type for every variant. It carries
// wrapper_object's fields, so the identity_cache variants keep its record in the object.
class bench_wrapper final : public gc::object, public wrapper_fields, public interop::wrapper_object {
 public:
  explicit bench_wrapper(const void* native) noexcept : wrapper_fields(native) {}
};

// A lookup that found nothing where a wrapper is rooted: counted (never expected), checked by
// the case after each measurement.
void note_missed_lookup() noexcept;
std::uint64_t missed_lookups() noexcept;

// What every variant does with the wrapper it found: reads one of its fields (so the wrapper's
// line is touched, as a caller would touch it) and keeps the value from being optimised away
// (a register operand of an empty asm: no memory clobber, no store). Returns the wrapper, so
// that setup can check that the lookup found the right one.
inline const bench_wrapper* consume(const void* found) noexcept {
  const auto* w = static_cast<const bench_wrapper*>(found);
  if (w == nullptr) [[unlikely]] {
    note_missed_lookup();
    return nullptr;
  }
  const void* field = w->identity;
  asm volatile("" : : "r"(field));
  return w;
}

// The peers' hash of an identity: palrt's multiply (bucket_hash.hpp) with the high half
// folded into the low bits, which the peers index their tables with (an address's own low
// bits are constant, and each peer's default hash of a pointer is the pointer itself). The
// same function for every peer, so no peer is slowed by a poor default hash.
inline std::size_t peer_hash(const void* identity) noexcept {
  const std::uint64_t h = interop::internal::fibonacci_hash(identity);
  return static_cast<std::size_t>(h ^ (h >> 32));
}

// What a peer's variant is built from: `live` identities and, for each, the weak handle of
// its (rooted) wrapper, which the peer's map stores; and the team that measures.
struct peer_inputs {
  std::shared_ptr<const std::vector<const void*>> identities;
  std::vector<gc::handle> handles;  // handles[i]: the wrapper of (*identities)[i]
  std::shared_ptr<thread_team> team;
};

// The peers (one file each). Each maps identity -> gc::handle, and its hit is the map's lookup,
// then handle_table::target() and consume(), the same work after the map as the
// identity_cache's find().
measured_variant tbb_hit_variant(const peer_inputs& inputs);
measured_variant libcuckoo_hit_variant(const peer_inputs& inputs);
measured_variant rculfhash_hit_variant(const peer_inputs& inputs);

struct no_member_setup {
  void operator()() const noexcept {}
};

// The measured hit loop of every variant, for `team->size()` threads at once. Member t looks
// up identities[(i + t * 37) & (live - 1)] for i = 0, 1, 2, ... (the seed's benchmark: the
// threads start at different identities and go through the same ones), calling lookup(id),
// which finds the wrapper and consume()s it. `live` is a power of two. member_setup runs on
// each member before its share of a slice (rculfhash registers its threads there).
//
// Before it is returned, the variant is checked: lookup(id) must give the wrapper of id for
// every identity (std::runtime_error otherwise), so every timed lookup is a hit.
template <class Lookup, class MemberSetup = no_member_setup>
measured_variant hit_variant(std::string name, std::shared_ptr<const std::vector<const void*>> identities,
                             std::shared_ptr<thread_team> team, Lookup lookup, MemberSetup member_setup = {}) {
  const std::size_t live = identities->size();
  if (live == 0 || (live & (live - 1)) != 0) throw std::logic_error("hit_variant: live must be a power of two");
  member_setup();
  for (const void* id : *identities) {
    const bench_wrapper* w = lookup(id);
    if (w == nullptr || w->identity != id)
      throw std::runtime_error("variant " + name + ": a lookup of a rooted wrapper " +
                               (w == nullptr ? std::string("found nothing") : "found another identity's wrapper"));
  }
  struct state {
    std::vector<member_run> runs;
    std::vector<std::uint64_t> next;  // each member's i, carried from slice to slice
  };
  auto s = std::make_shared<state>();
  s->runs.resize(static_cast<std::size_t>(team->size()));
  s->next.resize(static_cast<std::size_t>(team->size()));
  return {std::move(name), [identities, team, s, lookup, member_setup](std::chrono::nanoseconds budget) {
            team->run([&](int member) {
              member_setup();
              const void* const* ids = identities->data();
              const std::uint64_t mask = identities->size() - 1;
              const std::uint64_t offset = static_cast<std::uint64_t>(member) * 37;
              std::uint64_t i = s->next[static_cast<std::size_t>(member)];
              const auto start = bench_clock::now();
              const timed_run t = run_for(budget, [&] { lookup(ids[(i++ + offset) & mask]); });
              s->runs[static_cast<std::size_t>(member)] = member_run::of(start, t);
              s->next[static_cast<std::size_t>(member)] = i;
            });
            return team_result(s->runs, team->cpus_used());
          }};
}

}  // namespace palrt::bench::cache

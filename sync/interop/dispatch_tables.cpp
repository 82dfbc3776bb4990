// SPDX-License-Identifier: MIT
// The process-wide dispatch tables (dispatch_tables.hpp): checking a type's descriptor,
// building its table, and publishing it once.
//
// Protocol: a type's table is published in its descriptor (palrt_state.table) and never
// changes afterwards. dispatch_table_for() loads it with acquire; the first call for a type
// finds null and comes here, where one process-wide mutex serialises builds: under it, the
// table is looked at again (a racing first call may have published it meanwhile, and then
// it is returned as is), built, handed to the registry that owns every table, and published
// with release. The lock is held while building: a build calls no host code and allocates
// twice, and it happens once per type per process.
#include "palrt/interop/dispatch_tables.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "palrt/interop/internal/dispatch_cache_state.hpp"
#include "palrt/interop/internal/dispatch_tables_access.hpp"
#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::interop {

namespace {

// Every table ever built. Reachable from a global for the life of the process and never
// destroyed: vtables handed to native code must stay valid while any thread can still call
// through them, exit included (the same choice as the collector's orphaned states).
struct table_registry {
  std::mutex build;
  std::vector<std::unique_ptr<dispatch_table>> tables;  // under `build`
  // relaxed: a count for tests; written under `build`, read without it.
  std::atomic<std::uint64_t> built{0};
};

table_registry& registry() {
  static auto* const tables = [] {
    auto* r = new table_registry;
    // fork() holds `build`: a child building a table never finds it held by a thread it lacks.
    pal::internal::hold_across_fork(r->build, pal::internal::fork_lock_rank::leaf);
    return r;
  }();
  return *tables;
}

const char* name_or_unnamed(const char* name) noexcept { return name ? name : "(unnamed)"; }

// {xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}, the fields read back as from_guid() laid them out.
std::string id_text(const interface_id& id) {
  auto field = [&id](std::size_t at, std::size_t size) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size; ++i) {
      const std::size_t shift = std::endian::native == std::endian::little ? i : size - 1 - i;
      value |= std::uint64_t{id.bytes[at + i]} << (8 * shift);
    }
    return value;
  };
  char text[40];
  std::snprintf(text, sizeof text, "{%08llx-%04llx-%04llx-%02x%02x-%02x%02x%02x%02x%02x%02x}",
                static_cast<unsigned long long>(field(0, 4)), static_cast<unsigned long long>(field(4, 2)),
                static_cast<unsigned long long>(field(6, 2)), id.bytes[8], id.bytes[9], id.bytes[10], id.bytes[11],
                id.bytes[12], id.bytes[13], id.bytes[14], id.bytes[15]);
  return text;
}

[[noreturn]] void reject(const type_descriptor& type, const std::string& what) {
  throw std::invalid_argument("palrt: dispatch_table_for: type '" + std::string(name_or_unnamed(type.name)) +
                              "': " + what);
}

// The interfaces' positions in the descriptor, sorted by id; throws for a null interface or
// two interfaces with one id. Depends on the descriptor alone, so a bad one fails the same
// way on every call.
std::vector<std::size_t> checked_order(const type_descriptor& type) {
  const auto interfaces = type.interfaces;
  for (std::size_t i = 0; i < interfaces.size(); ++i) {
    if (!interfaces[i]) {
      std::string where = "interface #" + std::to_string(i) + " is null";
      if (i > 0) where += std::string(" (it follows '") + name_or_unnamed(interfaces[i - 1]->name) + "')";
      reject(type, where);
    }
  }
  std::vector<std::size_t> order(interfaces.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // stable: of two interfaces with one id, the first listed comes first in the message.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return interfaces[a]->id < interfaces[b]->id; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const interface_descriptor& first = *interfaces[order[k - 1]];
    const interface_descriptor& second = *interfaces[order[k]];
    if (first.id == second.id)
      reject(type, "interface #" + std::to_string(order[k - 1]) + " '" + name_or_unnamed(first.name) +
                       "' and interface #" + std::to_string(order[k]) + " '" + name_or_unnamed(second.name) +
                       "' have the same id " + id_text(first.id));
  }
  return order;
}

}  // namespace

dispatch_table::dispatch_table(const internal::dispatch_key&, const type_descriptor& type) : type_(&type) {
  const std::vector<std::size_t> order = checked_order(type);
  const std::size_t base = type.base_slots.size();
  std::size_t total = 0;
  for (const interface_descriptor* iface : type.interfaces) total += base + iface->methods.size();
  // Sized once: the entries' spans point into it.
  slots_.reserve(total);
  entries_.reserve(order.size());
  for (std::size_t index : order) {
    const interface_descriptor& iface = *type.interfaces[index];
    const std::size_t start = slots_.size();
    slots_.insert(slots_.end(), type.base_slots.begin(), type.base_slots.end());
    slots_.insert(slots_.end(), iface.methods.begin(), iface.methods.end());
    entries_.push_back(
        {iface.id, &iface, std::span<const dispatch_slot>(slots_.data() + start, slots_.size() - start)});
  }
}

namespace detail {

const dispatch_table& build_dispatch_table(const type_descriptor& type) {
  table_registry& r = registry();
  std::lock_guard guard(r.build);
  // relaxed: tables are published under `build`, which orders them for us.
  if (const dispatch_table* published = type.palrt_state.table.load(std::memory_order_relaxed)) return *published;
  r.tables.reserve(r.tables.size() + 1);  // so that keeping the table cannot throw
  // Throws for a bad descriptor: nothing is kept or published then.
  r.tables.push_back(std::make_unique<dispatch_table>(internal::dispatch_key{}, type));
  const dispatch_table* table = r.tables.back().get();
  r.built.fetch_add(1, std::memory_order_relaxed);
  // release: the table's contents before its address (acquire in dispatch_table_for).
  type.palrt_state.table.store(table, std::memory_order_release);
  return *table;
}

}  // namespace detail

namespace internal {

std::uint64_t dispatch_tables_built() noexcept { return registry().built.load(std::memory_order_relaxed); }

}  // namespace internal

}  // namespace palrt::interop

// SPDX-License-Identifier: MIT
// The process-wide table of small posted items' kinds (internal/post_ring.hpp): each callable
// type that post() stores in the ring registers the function that runs its bytes once, the
// first time it is posted (sync_manager.hpp), and its entries carry the index.
#include <array>
#include <atomic>

#include "palrt/sync/internal/post_ring.hpp"

namespace palrt::sync::internal {
namespace {

// Callable types a process posts small: a few dozen in palrt and its tests. Past the table,
// a type's items use nodes (slower, not wrong).
constexpr std::uint64_t max_kinds = 1024;
std::array<std::atomic<small_task_fn>, max_kinds> kinds{};
std::atomic<std::uint64_t> next_kind{post_ring::first_kind};

}  // namespace

std::uint64_t register_small_task_kind(small_task_fn run) noexcept {
  // relaxed: only distinct indices matter.
  const std::uint64_t k = next_kind.fetch_add(1, std::memory_order_relaxed);
  if (k >= max_kinds) return 0;
  // relaxed: the registering thread's static initialisation completes before any post of the
  // kind, whose ring publish (release) the worker acquires before it reads the table.
  kinds[k].store(run, std::memory_order_relaxed);
  return k;
}

small_task_fn small_task_function(std::uint64_t kind) noexcept {
  // relaxed: see register_small_task_kind().
  return kinds[kind].load(std::memory_order_relaxed);
}

}  // namespace palrt::sync::internal

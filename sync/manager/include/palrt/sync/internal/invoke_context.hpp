// SPDX-License-Identifier: MIT
// What an invoke() caller and the worker share for one call: the caller's function, its
// exception, the queue node, and the word the caller sleeps on until the worker is done.
//
// Each calling thread leases one from its thread-local slot (lease_slot.hpp), so a steady
// stream of invoke() allocates nothing and a nested invoke gets a context of its own.
//
// Completion protocol (one writer, one waiter):
//   caller: word = pending; queue the node; spin (adaptive_spin.hpp) while the word reads
//           `pending`; then, to sleep, CAS pending -> sleeping and futex-wait while the word is
//           `sleeping`; done once it reads `done`.
//   worker: run the function; store its exception; exchange(done). Only if the previous value
//           was `sleeping` does it make the futex syscall. After the exchange it touches the
//           context no more: the caller may return it to the slot (or free it) at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "palrt/sync/internal/adaptive_spin.hpp"
#include "palrt/sync/task.hpp"
#include "palrt/sync/internal/work_node.hpp"

namespace palrt::sync::internal {

struct invoke_context {
  static constexpr std::uint32_t pending = 0, sleeping = 1, done = 2;

  std::atomic<std::uint32_t> word{pending};
  function_ref fn;
  std::exception_ptr error;
  work_node node;
  adaptive_spin spin;  // the caller's: the context is its thread's, so it learns that thread's calls

  // The worker's half: after the function ran (or was cancelled, with `error` set).
  void complete() noexcept;
  // The caller's half: returns once complete() ran.
  void wait_until_done() noexcept;
};

// The calling thread's leased context, and the return of it. Throws std::bad_alloc.
std::unique_ptr<invoke_context> lease_invoke_context();
void return_invoke_context(std::unique_ptr<invoke_context> context) noexcept;
// Contexts allocated so far because a thread's slot was empty (first use, or nesting).
std::uint64_t invoke_context_allocations() noexcept;

}  // namespace palrt::sync::internal

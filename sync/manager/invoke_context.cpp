// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/invoke_context.hpp"

#include "palrt/pal/internal/futex.hpp"
#include "palrt/sync/internal/lease_slot.hpp"

namespace palrt::sync::internal {
namespace {

constinit thread_local lease_slot<invoke_context> slot;
std::atomic<std::uint64_t> allocations{0};

}  // namespace

void invoke_context::complete() noexcept {
  // release: publishes the function's effects and `error` to the caller, which reads them
  // after an acquire load of `done`. Nothing touches *this after the exchange.
  if (word.exchange(done, std::memory_order_release) == sleeping) pal::internal::futex_wake(word, 1);
}

void invoke_context::wait_until_done() noexcept {
  // acquire: as below, when the spin sees `done`.
  if (spin.spin([this] { return word.load(std::memory_order_acquire) == done; })) return;
  std::uint32_t expected = pending;
  // acquire on both outcomes: when the word is already `done`, the function's effects are
  // visible after this.
  if (word.compare_exchange_strong(expected, sleeping, std::memory_order_acquire, std::memory_order_acquire)) {
    // acquire: pairs with complete()'s release.
    while (word.load(std::memory_order_acquire) != done) pal::internal::futex_wait(word, sleeping);
  }  // else expected == done: it completed just after the spin gave up
  spin.parked();
}

std::unique_ptr<invoke_context> lease_invoke_context() { return slot.take(allocations); }

void return_invoke_context(std::unique_ptr<invoke_context> context) noexcept { slot.give(std::move(context)); }

// relaxed: a statistic.
std::uint64_t invoke_context_allocations() noexcept { return allocations.load(std::memory_order_relaxed); }

}  // namespace palrt::sync::internal

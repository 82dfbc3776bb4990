// SPDX-License-Identifier: MIT
// keep_until_exit (internal/keep_until_exit.hpp): a lock-free stack, never popped.
#include "palrt/pal/internal/keep_until_exit.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace palrt::pal::internal {
namespace {

struct kept_state {
  std::shared_ptr<const void> state;
  kept_state* next;
};
constinit std::atomic<kept_state*> kept{nullptr};

}  // namespace

void keep_until_exit(std::shared_ptr<const void> state) noexcept {
  auto* entry = new (std::nothrow) kept_state{std::move(state), nullptr};
  if (!entry) {
    std::fputs("palrt: out of memory keeping state that cannot be destroyed\n", stderr);
    std::abort();
  }
  kept_state* head = kept.load(std::memory_order_relaxed);
  do {
    entry->next = head;
    // relaxed: nobody reads the list; it only keeps the states reachable.
  } while (!kept.compare_exchange_weak(head, entry, std::memory_order_relaxed));
}

}  // namespace palrt::pal::internal

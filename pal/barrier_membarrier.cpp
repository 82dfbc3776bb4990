// SPDX-License-Identifier: MIT
// Strategy 1: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED). The kernel IPIs only the CPUs
// whose rq->curr is a thread of this process; a thread off its CPU needs none, because the
// scheduler executes a full barrier between its last user-space access and the store to
// rq->curr that switched it out, and another between the store that switches it back in and
// its return to user space (kernel/sched/membarrier.c). ~0.6 us on 2 CPUs.
#include <cerrno>

#include "palrt/pal/internal/barrier_strategies.hpp"
#include "palrt/pal/membarrier.hpp"

namespace palrt::pal::internal {
namespace {

class membarrier_barrier final : public barrier_instance {
 public:
  barrier_strategy strategy() const noexcept override { return barrier_strategy::membarrier; }
  void flush() noexcept override {
    // No lock and no state: a flush from a signal handler that interrupted one on its thread
    // is one more system call, served as any other.
    run_flush_hook();
    // Cannot fail once registered, short of a seccomp filter installed afterwards; a
    // barrier that silently did nothing would corrupt the caller, so stop loudly instead.
    if (auto r = membarrier::private_expedited(); !r.ok()) barrier_failed("membarrier", r.error);
  }
};

}  // namespace

std::unique_ptr<barrier_instance> make_membarrier_barrier(bool registered) {
  // The process barrier's own instance comes straight after a successful registration, which
  // already proved the commands exist: no second QUERY, no probe, on the startup path.
  if (registered) return std::make_unique<membarrier_barrier>();
  const membarrier::result query = membarrier::query();
  const auto mask = static_cast<std::uint32_t>(query.value);
  if (!query.ok() || !(mask & membarrier::cmd_private_expedited) ||
      !(mask & membarrier::cmd_register_private_expedited)) {
    // QUERY's own errno when it failed (seccomp); ENOSYS when the kernel lacks the commands.
    throw barrier_error(query.ok() ? ENOSYS : query.error, std::generic_category(),
                        "membarrier PRIVATE_EXPEDITED unavailable");
  }
  if (auto r = membarrier::register_private_expedited(); !r.ok())
    throw barrier_error(r.error, std::generic_category(), "membarrier registration failed");
  // Prove it works now rather than at the first flush.
  if (auto r = membarrier::private_expedited(); !r.ok())
    throw barrier_error(r.error, std::generic_category(), "membarrier PRIVATE_EXPEDITED failed");
  return std::make_unique<membarrier_barrier>();
}

}  // namespace palrt::pal::internal

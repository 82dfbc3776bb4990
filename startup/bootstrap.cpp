// SPDX-License-Identifier: MIT
#include "palrt/startup/bootstrap.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>  // strerrorname_np

#include "palrt/core/clock.h"
#include "palrt/pal/internal/cancellation.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/startup/internal/baselines.hpp"
#include "palrt/startup/internal/phase.hpp"

namespace palrt::startup {
namespace {

using internal::ordering;
using internal::phase;
using pal::internal::registration_policy;

// Which runtime is alive and not shut down: at most one at a time, because the service
// threads and the thread factory's registration policy are process-wide. It holds the fork
// generation the runtime started in, plus one, or 0 for none. A slot claimed in an earlier
// generation is a parent's runtime seen from a fork()ed child: free there. seq_cst: a plain
// claim/release word, never on a hot path.
std::atomic<std::uint64_t> runtime_slot{0};

bool claim_process_slot(std::uint64_t generation) noexcept {
  const std::uint64_t mine = generation + 1;
  std::uint64_t seen = runtime_slot.load();
  do {
    if (seen == mine) return false;  // generations only grow: anything else is a parent's
  } while (!runtime_slot.compare_exchange_weak(seen, mine));
  return true;
}

void release_process_slot(std::uint64_t generation) noexcept {
  std::uint64_t mine = generation + 1;
  runtime_slot.compare_exchange_strong(mine, 0);
}

// What shutdown() of a parent's runtime returns in a fork()ed child.
const shutdown_report forked_child_shutdown{0, {}, true};

registration_policy policy_for(ordering o) {
  switch (o) {
    case ordering::registered_first: return registration_policy::before_first_thread;
    case ordering::threads_first: return registration_policy::deferred;
    case ordering::no_membarrier: return registration_policy::never;
  }
  return registration_policy::before_first_thread;
}

// The phase's error, for startup_error's what(), which std::system_error ends with the code's
// message itself ("...: Invalid argument"): the phase's own what() ends with that same message
// (a system_error's does), so it is cut there, and the reason is said once, after the errno's
// name: "...: PALRT_BARRIER=bogus is not one of ... [EINVAL]: Invalid argument".
std::string describe_failure(std::string_view phase, const std::system_error& e) {
  std::string_view inner = e.what();
  const std::string said_twice = ": " + e.code().message();
  if (inner.size() > said_twice.size() && inner.ends_with(said_twice)) inner.remove_suffix(said_twice.size());
  std::string what = "palrt startup: phase '" + std::string(phase) + "' failed: " + std::string(inner);
  if (e.code().category() == std::generic_category() || e.code().category() == std::system_category()) {
    if (const char* name = strerrorname_np(e.code().value())) what += std::string(" [") + name + "]";
  }
  return what;
}

// Stops phases [0, count): asks all to stop, then joins them, both in reverse order, so that
// their threads wind down together. Returns the names of those that did not stop in time.
std::vector<std::string> stop_phases(std::vector<std::unique_ptr<phase>>& phases, std::size_t count,
                                     runtime_services& services, std::chrono::nanoseconds timeout) {
  for (std::size_t i = count; i-- > 0;) phases[i]->request_stop(services);
  std::vector<std::string> not_stopped;
  for (std::size_t i = count; i-- > 0;)
    if (!phases[i]->stop(services, timeout)) not_stopped.emplace_back(phases[i]->name());
  return not_stopped;
}

// The last collect(), once the runtime's threads are stopped: it runs the finalizers still
// queued (what a shutdown left: a long queue, or the objects behind a finalizer that missed
// the deadline, whose thread may still be inside it) and those of objects dead by now, on
// this thread, before the collector is destroyed (its destructor frees what is queued
// unrun). Not in a fork()ed child (collect() refuses there), and never throws: a destructor.
void finalize_what_is_left(runtime_services& services) noexcept {
  const std::unique_ptr<gc::collector>& collector = internal::services_access::collector(services);
  if (!collector) return;  // a bootstrap that failed before the handle table
  try {
    (void)collector->collect();
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "palrt: runtime destroyed: its last collect() failed (%s); what was queued for "
                 "finalization is freed without its finalizer\n",
                 e.what());
  }
}

}  // namespace

startup_error::startup_error(std::string phase, std::error_code code, const std::string& what)
    : std::system_error(code, what), phase_(std::move(phase)) {}

runtime::runtime(const options& opts, ordering order) : options_(opts), phases_(internal::make_phases(opts, order)) {}

runtime::~runtime() {
  shutdown();
  if (fork_generation_ == pal::internal::fork_stamp::now()) finalize_what_is_left(services_);
}

const shutdown_report& runtime::shutdown() {
  if (fork_generation_ != pal::internal::fork_stamp::now()) {
    // A fork()ed child: the parent's threads are not here to stop, and its locks may be held
    // for good (the once flag's among them, if the parent was shutting down at fork()).
    // acquire: pairs with the release below (the report of a shutdown done before fork()).
    return shut_down_.load(std::memory_order_acquire) ? shutdown_report_ : forked_child_shutdown;
  }
  const pal::internal::cancellation_disabled no_cancellation;  // it joins (thread_factory.hpp)
  // call_once: concurrent callers wait for the one doing the work and then read its report.
  std::call_once(shutdown_once_, [this] {
    const std::int64_t t0 = palrt_monotonic_ns();
    shutdown_report_.not_joined = stop_phases(phases_, phases_.size(), services_, options_.stop_timeout);
    shutdown_report_.duration_ns = palrt_monotonic_ns() - t0;
    shut_down_.store(true, std::memory_order_release);
    if (holds_process_slot_) release_process_slot(fork_generation_);
  });
  return shutdown_report_;
}

std::unique_ptr<runtime> bootstrap(const options& opts) {
  return internal::runtime_access::bootstrap(opts, ordering::registered_first);
}

std::unique_ptr<runtime> internal::runtime_access::bootstrap(const options& opts, ordering order) {
  // Not a cancellation point (pal/internal/cancellation.hpp): its phases read /proc (the
  // thread census, the signal barrier's set-up) and join what they unwind.
  const pal::internal::cancellation_disabled no_cancellation;
  const std::uint64_t generation = pal::internal::fork_stamp::now();
  if (!claim_process_slot(generation))
    throw startup_error("bootstrap", std::make_error_code(std::errc::device_or_resource_busy),
                        "palrt startup: another runtime is alive in this process; shut it down first [EBUSY]");
  std::unique_ptr<runtime> rt;
  try {
    rt.reset(new runtime(opts, order));  // private constructor: no make_unique
  } catch (...) {
    release_process_slot(generation);
    throw;
  }
  rt->fork_generation_ = generation;
  rt->holds_process_slot_ = true;  // from here on, shutdown() gives the slot back
  pal::internal::set_registration_policy(policy_for(order));
  auto& phases = rt->phases_;
  rt->report_.phases.reserve(phases.size());

  // Stops what started so far and turns the failure into a startup_error naming the phase.
  // The runtime is then shut down (its slot given back) and destroyed with nothing to stop.
  auto unwind = [&](std::size_t failed, std::size_t started) {
    stop_phases(phases, started, rt->services_, opts.stop_timeout);
    std::call_once(rt->shutdown_once_, [] {});
    rt->shut_down_.store(true, std::memory_order_release);
    release_process_slot(generation);
    try {
      throw;
    } catch (const std::system_error& e) {
      throw startup_error(std::string(phases[failed]->name()), e.code(), describe_failure(phases[failed]->name(), e));
    }
  };

  const std::int64_t t0 = palrt_monotonic_ns();
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const std::int64_t start = palrt_monotonic_ns();
    try {
      phases[i]->start(rt->services_);
    } catch (...) {
      unwind(i, i);
    }
    const std::int64_t end = palrt_monotonic_ns();
    rt->report_.phases.push_back({std::string(phases[i]->name()), start - t0, end - start});
  }
  // Not waiting for the service threads to enter their loops: each exists once its phase's
  // start() returned (the kernel made it, or start() threw and was unwound above), nothing
  // it does on its way into its loop can fail, and what it is given meanwhile waits for it
  // (a wake-up is kept, and a stop request too: bootstrap.hpp, "Service threads").
  rt->report_.bootstrap_ns = palrt_monotonic_ns() - t0;
  if (const auto* barrier = pal::process_barrier_state_if_initialized()) rt->report_.barrier = *barrier;
  return rt;
}

}  // namespace palrt::startup

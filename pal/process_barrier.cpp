// SPDX-License-Identifier: MIT
// The process-wide choice of barrier strategy and flush_process_write_buffers().
#include "palrt/pal/process_barrier.hpp"

#include <sys/auxv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "palrt/pal/internal/barrier_strategies.hpp"
#include "palrt/pal/internal/earlier_registration.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/pal/internal/signal_safe_message.hpp"
#include "palrt/core/membarrier_registration.h"
#include "palrt/core/thread_census.h"

#include "palrt/pal/internal/process_copies.hpp"

// The process barrier is the state two copies of palrt would each keep: this links the note
// and the check for another copy (process_copies.cpp) into every copy that has one.
[[gnu::used]] static const char* const palrt_copy_anchor = &palrt::pal::internal::this_copy;

namespace palrt::pal {
namespace {

using internal::barrier_instance;

// Both are written once under init_mutex; `active` is then only read. Constant-initialised,
// so that initialisation works from any static initialiser; held across fork() (below). An
// owned_mutex, so that a flush from a signal handler that interrupted this thread's
// initialisation sees that it did (flush_process_write_buffers()).
constinit internal::owned_mutex init_mutex;
process_barrier_state state;
// acquire/release: a thread that sees the instance also sees `state`, written before it.
std::atomic<barrier_instance*> active{nullptr};

// process_barrier_access's one-shot hooks (null normally).
constinit std::atomic<const internal::barrier_hook*> next_flush_hook{nullptr};
constinit std::atomic<const internal::barrier_hook*> next_initialisation_hook{nullptr};

void run_once(std::atomic<const internal::barrier_hook*>& slot) noexcept {
  // relaxed first: the one load every flush pays while no test has set a hook.
  if (!slot.load(std::memory_order_relaxed)) return;
  // acquire: the hook's fields, stored before the setter's release.
  if (const internal::barrier_hook* h = slot.exchange(nullptr, std::memory_order_acquire)) h->call(h->context);
}

std::optional<barrier_strategy> forced_strategy() {
  // Not under AT_SECURE: a setuid program must not let its caller pick its barrier.
  const char* value = ::secure_getenv("PALRT_BARRIER");
  if (!value || !*value) return std::nullopt;
  if (auto s = parse_barrier_strategy(value)) return s;
  throw barrier_error(EINVAL, std::generic_category(),
                      std::string("PALRT_BARRIER=") + value + " is not one of membarrier, mprotect, signal");
}

// Only called for membarrier once registration succeeded. A strategy that is no barrier on
// this machine (mprotect off x86-64 or with INVLPGB) is refused whether it was chosen or
// forced: forcing it must fail loudly, never hand out a barrier that does not reach every thread.
std::unique_ptr<barrier_instance> make(barrier_strategy s) {
  switch (s) {
    case barrier_strategy::membarrier: return internal::make_membarrier_barrier(/*registered=*/true);
    case barrier_strategy::mprotect: return internal::make_mprotect_barrier();
    case barrier_strategy::signal: return internal::make_signal_barrier();
  }
  throw barrier_error(EINVAL, std::generic_category(), "unknown barrier strategy");
}

// fork() waits for an initialisation, an mprotect toggle or a signal round in progress, so
// that a child never inherits their locks held by a thread it does not have (its first flush
// would wait forever). Registered before any of them is first taken, with no lock held
// (fork_generation.hpp); the strategies' locks are taken under init_mutex, so they rank after it.
void hold_barrier_locks_across_fork() {
  static const bool held = [] {
    internal::hold_across_fork(init_mutex, internal::fork_lock_rank::barrier_setup);
    internal::hold_across_fork(internal::mprotect_toggle_lock(), internal::fork_lock_rank::barrier_flush);
    internal::hold_across_fork(internal::signal_round_lock(), internal::fork_lock_rank::barrier_flush);
    return true;
  }();
  (void)held;
}

// Whether an earlier registrant's record says this process was registered with one thread,
// so that the census has nothing to add (internal/earlier_registration.hpp). Asked only when
// this call found the process registered already, or could not tell (already_registered -1).
bool earlier_registrant_saw_one_thread(const palrt_registration& reg, internal::earlier_registration_lookup earlier) {
  if (!earlier || reg.error != 0 || reg.already_registered == 0) return false;
  const std::optional<internal::earlier_registration> record = earlier();
  return record &&
         (record->threads_at_registration == 1 || (record->threads_at_registration == 0 && record->fast_path_inferred));
}

void register_membarrier(process_barrier_state& st, registration_census census,
                         internal::earlier_registration_lookup earlier) {
  palrt_registration reg;
  palrt_membarrier_register(&reg);
  st.fast_path_inferred = palrt_registration_looks_fast(&reg) != 0;
  // Counted after the timed registration, so it does not inflate registration_ns; palrt
  // starts no thread in between (the factory waits on init_mutex), a host's threads would be
  // counted (they were alive at registration, or started during this census).
  if (census == registration_census::always ||
      (!st.fast_path_inferred && !earlier_registrant_saw_one_thread(reg, earlier)))
    st.threads_at_registration = palrt_threads_in_process();
  st.membarrier_mask = reg.mask;
  st.registration_error = reg.error;
  st.registered = reg.error == 0;
  st.registration_started_ns = reg.started_ns;
  st.registration_ns = reg.duration_ns;
}

}  // namespace

std::string_view to_string(barrier_strategy s) noexcept {
  switch (s) {
    case barrier_strategy::membarrier: return "membarrier";
    case barrier_strategy::mprotect: return "mprotect";
    case barrier_strategy::signal: return "signal";
  }
  return "unknown";
}

std::optional<barrier_strategy> parse_barrier_strategy(std::string_view name) noexcept {
  for (auto s : {barrier_strategy::membarrier, barrier_strategy::mprotect, barrier_strategy::signal})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

int barrier_signal_number() noexcept { return SIGRTMAX - 1; }

namespace {

// `on_first_use`: called by the first flush, not by the host (the state says so).
const process_barrier_state& initialize(registration_mode mode, registration_census census, bool on_first_use,
                                        internal::earlier_registration_lookup earlier) {
  hold_barrier_locks_across_fork();
  std::lock_guard lock(init_mutex);
  if (active.load(std::memory_order_relaxed)) return state;
  run_once(next_initialisation_hook);

  process_barrier_state st{};
  st.initialized_on_first_use = on_first_use;
  const auto forced = forced_strategy();
  if (mode == registration_mode::register_membarrier) register_membarrier(st, census, earlier);

  std::unique_ptr<barrier_instance> chosen;
  if (forced) {
    if (*forced == barrier_strategy::membarrier && mode == registration_mode::skip_membarrier)
      throw barrier_error(EINVAL, std::generic_category(),
                          "PALRT_BARRIER=membarrier contradicts the no-membarrier ordering");
    if (*forced == barrier_strategy::membarrier && !st.registered)
      throw barrier_error(st.registration_error, std::generic_category(),
                          "PALRT_BARRIER=membarrier but registration failed");
    chosen = make(*forced);
    st.forced = true;
  } else {
    // First that works: membarrier (only if registered), mprotect, signal. The last failure
    // is kept as it came, not as a std::system_error made up front: that would format
    // ENOSYS's message (strerror, gettext, a string) on every start, to throw it away.
    std::optional<barrier_error> last;
    for (auto s : {barrier_strategy::membarrier, barrier_strategy::mprotect, barrier_strategy::signal}) {
      if (s == barrier_strategy::membarrier && !st.registered) continue;
      try {
        chosen = make(s);
        break;
      } catch (const barrier_error& e) {
        last = e;
      }
    }
    if (!chosen) {
      if (!last) throw barrier_error(ENOSYS, std::generic_category(), "no process barrier strategy works");
      throw barrier_error(last->code(), std::string("no process barrier strategy works: ") + last->what());
    }
  }
  st.strategy = chosen->strategy();
  state = st;
  // Intentionally never destroyed: any thread may flush until the process is gone, even
  // after static destructors have run.
  active.store(chosen.release(), std::memory_order_release);
  return state;
}

}  // namespace

const process_barrier_state& initialize_process_barrier(registration_mode mode, registration_census census) {
  return initialize(mode, census, /*on_first_use=*/false, /*earlier=*/nullptr);
}

const process_barrier_state& internal::initialize_process_barrier(registration_mode mode, registration_census census,
                                                                  earlier_registration_lookup earlier) {
  return initialize(mode, census, /*on_first_use=*/false, earlier);
}

const process_barrier_state* process_barrier_state_if_initialized() noexcept {
  return active.load(std::memory_order_acquire) ? &state : nullptr;
}

void flush_process_write_buffers() {
  barrier_instance* b = active.load(std::memory_order_acquire);
  if (__builtin_expect(b == nullptr, 0)) {
    // A signal handler that interrupted this thread's initialisation (a membarrier
    // registration can take milliseconds) finds no barrier yet, and waiting for init_mutex
    // would wait for itself: say so at once instead.
    if (init_mutex.held_by(internal::owned_mutex::current_tid())) {
      (internal::signal_safe_message()
       << "palrt: FlushProcessWriteBuffers: called from a signal handler that interrupted the process barrier's "
          "initialisation on the same thread, before any strategy was set up; initialise it "
          "(initialize_process_barrier()) before installing a handler that flushes")
          .write_line();
      std::abort();
    }
    try {
      initialize(registration_mode::register_membarrier, registration_census::if_slow, /*on_first_use=*/true,
                 /*earlier=*/nullptr);
    } catch (const std::exception& e) {
      (internal::signal_safe_message() << "palrt: FlushProcessWriteBuffers: " << e.what()).write_line();
      std::abort();
    }
    b = active.load(std::memory_order_acquire);
  }
  b->flush();
}

namespace {

template <class Flush>
double median_flush_ns(Flush flush, int flushes_per_round) {
  constexpr int rounds = 5;
  double per_flush[rounds];
  flushes_per_round = std::max(flushes_per_round, 1);
  for (double& r : per_flush) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < flushes_per_round; ++i) flush();
    r = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / flushes_per_round;
  }
  std::sort(per_flush, per_flush + rounds);
  return per_flush[rounds / 2];
}

}  // namespace

double measure_flush_cost_ns(int flushes_per_round) {
  return median_flush_ns([] { flush_process_write_buffers(); }, flushes_per_round);
}

namespace internal {

std::unique_ptr<barrier_instance> process_barrier_access::make_instance(barrier_strategy s) {
  hold_barrier_locks_across_fork();
  if (s == barrier_strategy::membarrier) return make_membarrier_barrier(/*registered=*/false);
  return make(s);
}

double process_barrier_access::measure_flush_cost_ns(barrier_instance& barrier, int flushes_per_round) {
  return median_flush_ns([&barrier] { barrier.flush(); }, flushes_per_round);
}

void barrier_failed(const char* strategy, int error) noexcept {
  (signal_safe_message()
   << "palrt: " << strategy << " process barrier failed: " << signal_safe_message::describe_errno(error))
      .write_line();
  std::abort();
}

void run_flush_hook() noexcept { run_once(next_flush_hook); }

void process_barrier_access::hook_next_flush(const barrier_hook* hook) noexcept {
  next_flush_hook.store(hook, std::memory_order_release);  // release: see run_once
}

void process_barrier_access::hook_next_initialisation(const barrier_hook* hook) noexcept {
  next_initialisation_hook.store(hook, std::memory_order_release);  // release: see run_once
}
}  // namespace internal

}  // namespace palrt::pal

// FlushProcessWriteBuffers is a barrier: a store-buffering litmus test.
//
//   thread A (fast side):  x = 1; compiler barrier; r1 = y
//   thread B (slow side):  y = 1; FlushProcessWriteBuffers(); r2 = x
//
// r1 == 0 && r2 == 0 is forbidden when the flush is a process-wide barrier: either A's store
// precedes the barrier A is made to execute (then B reads x == 1), or A's load follows it
// (then A reads y == 1). Without the flush, x86 store buffers produce that outcome readily,
// which the control case asserts, so the test is shown able to fail.
//
// The strategy is process-wide and chosen once, so each strategy runs in a fresh process
// with PALRT_BARRIER set, exactly as a user would force it.
#include <doctest/doctest.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/thread_census.hpp"
#include "palrt/pal/wake_event.hpp"
#include "pal/internal/futex.hpp"
#include "scale.hpp"
#include "thread_state.hpp"
#include "kernel_support.hpp"
#include "privileges.hpp"
#include "subprocess.hpp"

using namespace palrt;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool under_tsan = true;
#else
constexpr bool under_tsan = false;
#endif

struct litmus_outcome {
  long iterations = 0;
  long forbidden = 0;      // r1 == 0 && r2 == 0
  long only_a_first = 0;   // r1 == 0, r2 == 1
  long only_b_first = 0;   // r1 == 1, r2 == 0
  long both_seen = 0;      // r1 == 1, r2 == 1
};

// Spin-waits until `ready()`; yields now and then so that an oversubscribed machine (a
// sanitizer build, another job) hands the CPU to the thread we wait for instead of burning
// a whole time slice.
template <class Ready>
inline void spin_until(Ready ready) {
  for (unsigned n = 1; !ready(); ++n)
    if (n % 4096 == 0) sched_yield();
}

// Busy-waits n loop turns; the empty asm keeps the compiler from deleting the loop.
inline void spin_for(unsigned n) {
  for (unsigned i = 0; i < n; ++i) asm volatile("" : "+r"(i));
}

// Random delays of up to this many loop turns (~100 ns here) on both sides, on top of an
// adaptive bias: the threads leave the spin barrier a variable time apart (100-200 ns on a
// quiet machine, far more under a sanitizer or load), so a fixed delay would let one side
// win every round and the store-load windows would never overlap. After each round in which
// one side ran entirely first, the bias delays that side a little more next time, which
// keeps the two sides racing (measured: 5-35% of rounds overlap).
constexpr unsigned jitter_turns = 256;

// Runs rounds until `done(outcome)` says enough, or `budget` passes (or, when stop_on_forbidden,
// until the forbidden outcome shows up). Both threads meet at a spin barrier each round and
// then jitter a little, so their store-load windows overlap in every alignment.
// Two CPUs the litmus threads may run on, so that each side gets its own and the two really
// run at the same time (on one CPU the forbidden outcome is impossible, which would make the
// control case fail for the wrong reason on a busy machine). Empty when fewer than two.
std::vector<int> two_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.size() < 2) cpus.clear();
  return cpus;
}

void pin_this_thread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one);  // best effort: unpinned still works, just less often
}

template <class Done>
litmus_outcome store_buffering(bool with_flush, Done done, std::chrono::milliseconds budget,
                               bool stop_on_forbidden) {
  alignas(64) std::atomic<int> x{0};
  alignas(64) std::atomic<int> y{0};
  alignas(64) std::atomic<long> arrive_a{0}, arrive_b{0}, done_a{0};
  alignas(64) std::atomic<int> r1{0};
  // > 0 delays B, < 0 delays A, in loop turns; written by B before it releases A (relaxed:
  // ordered by the arrive_b release/acquire pair).
  alignas(64) std::atomic<int> bias{0};

  const std::vector<int> cpus = two_cpus();
  cpu_set_t saved_affinity;
  const bool restore = sched_getaffinity(0, sizeof saved_affinity, &saved_affinity) == 0 && !cpus.empty();
  if (restore) pin_this_thread(cpus[0]);

  auto thread_a = pal::start_thread({"litmus-a", 0}, [&] {
    if (!cpus.empty()) pin_this_thread(cpus[1]);
    unsigned jitter = 1;
    for (long i = 1;; ++i) {
      arrive_a.store(i, std::memory_order_release);
      long b = 0;
      spin_until([&] {
        b = arrive_b.load(std::memory_order_acquire);
        return b == -1 || b >= i;
      });
      if (b == -1) break;  // B ended the run
      jitter = jitter * 1103515245u + 12345u;
      spin_for((jitter >> 16) % jitter_turns + static_cast<unsigned>(std::max(0, -bias.load(std::memory_order_relaxed))));
      x.store(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the fast side: compiler barrier only
      r1.store(y.load(std::memory_order_relaxed), std::memory_order_relaxed);
      done_a.store(i, std::memory_order_release);
    }
  });

  litmus_outcome out;
  unsigned jitter = 7;
  constexpr int bias_step = 16, max_bias = 1 << 16;
  int b_delay = 0;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (long i = 1;; ++i) {
    x.store(0, std::memory_order_relaxed);
    y.store(0, std::memory_order_relaxed);
    bias.store(b_delay, std::memory_order_relaxed);
    arrive_b.store(i, std::memory_order_release);  // release: A sees the reset above
    spin_until([&] { return arrive_a.load(std::memory_order_acquire) >= i; });
    jitter = jitter * 1103515245u + 12345u;
    spin_for((jitter >> 16) % jitter_turns + static_cast<unsigned>(std::max(0, b_delay)));
    y.store(1, std::memory_order_relaxed);
    if (with_flush)
      pal::flush_process_write_buffers();
    else
      std::atomic_signal_fence(std::memory_order_seq_cst);
    int r2 = x.load(std::memory_order_relaxed);
    spin_until([&] { return done_a.load(std::memory_order_acquire) >= i; });
    int a = r1.load(std::memory_order_relaxed);
    ++out.iterations;
    if (a == 0 && r2 == 0) {
      ++out.forbidden;
    } else if (a == 0) {
      ++out.only_a_first;
      b_delay = std::max(b_delay - bias_step, -max_bias);  // A ran first: delay A, not B
    } else if (r2 == 0) {
      ++out.only_b_first;
      b_delay = std::min(b_delay + bias_step, max_bias);  // B ran first: delay B
    } else {
      ++out.both_seen;
    }
    bool stop = (stop_on_forbidden && out.forbidden > 0) || done(out) ||
                ((i & 255) == 0 && std::chrono::steady_clock::now() > deadline);
    if (stop) break;
  }
  arrive_b.store(-1, std::memory_order_release);  // A is waiting for a round that will not come
  thread_a.join();
  if (restore) sched_setaffinity(0, sizeof saved_affinity, &saved_affinity);
  return out;
}

std::string describe(const litmus_outcome& o) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "iterations=%ld forbidden=%ld a_first=%ld b_first=%ld both=%ld", o.iterations,
                o.forbidden, o.only_a_first, o.only_b_first, o.both_seen);
  return buf;
}


}  // namespace

// How long one litmus run may take at most: generous, for busy machines, and bounded so the
// slow suite (scale 50) fits its meson timeout.
std::chrono::milliseconds litmus_budget() {
  return std::chrono::milliseconds(20000) * std::min<long>(palrt::testing::scale(), 10);
}

// For fresh processes: sets up the process barrier (PALRT_BARRIER decides) and prints
// "strategy=<name>", or "unavailable <errno> <what>" and false.
bool initialize_and_print_strategy() {
  try {
    const auto& st = pal::initialize_process_barrier();
    std::printf("strategy=%s\n", std::string(pal::to_string(st.strategy)).c_str());
    return true;
  } catch (const pal::barrier_error& e) {
    std::printf("unavailable %d %s\n", e.code().value(), e.what());
    return false;
  }
}

// Exit 0: ran, no forbidden outcome. 1: forbidden outcome seen. 4: the threads never raced
// (the run proves nothing). 3: strategy unavailable
// (stdout: "unavailable <errno>"). Prints the chosen strategy and the counts.
PALRT_FRESH_PROCESS(litmus_with_flush) {
  if (!initialize_and_print_strategy()) return 3;
  // 20,000 rounds at least, and until the two sides have raced at least once; a busy
  // machine can keep one thread off the CPU for long stretches, hence the generous budget,
  // which a quiet machine never comes near (it runs the rounds in well under a second).
  const long rounds = 20000 * palrt::testing::scale();
  auto o = store_buffering(
      true, [rounds](const litmus_outcome& out) { return out.iterations >= rounds && out.only_a_first > 0; },
      litmus_budget(), false);
  std::printf("%s\n", describe(o).c_str());
  if (o.forbidden != 0) return 1;
  // A run where A's load never raced B's store proves nothing about the barrier.
  return o.only_a_first > 0 ? 0 : 4;
}

PALRT_FRESH_PROCESS(automatic_choice) {
  const auto& st = pal::initialize_process_barrier();
  std::printf("strategy=%s registered=%d registration_error=%d threads=%d forced=%d\n",
              std::string(pal::to_string(st.strategy)).c_str(), st.registered, st.registration_error,
              st.threads_at_registration, st.forced);
  return 0;
}

TEST_CASE("process barrier: no forbidden store-buffering outcome, for each strategy forced by PALRT_BARRIER") {
  for (const std::string strategy : {"membarrier", "mprotect", "signal"}) {
    CAPTURE(strategy);
    // The child's own budget, plus time to start and report.
    auto child = run_fresh("litmus_with_flush", {{"PALRT_BARRIER=" + strategy}, {}, litmus_budget() + std::chrono::seconds(30)});
    REQUIRE_FALSE(child.timed_out);
    INFO(child.out, child.err);
    if (strategy == "membarrier" && !membarrier_available()) {
      // Denied (seccomp) or absent: forcing it must fail loudly, not fall back silently.
      CHECK(child.exit_code == 3);
      CHECK(child.out.find("unavailable") != std::string::npos);
      continue;
    }
    REQUIRE(child.exit_code != 3);
    CHECK(child.out.find(std::string("strategy=") + strategy) != std::string::npos);
    CHECK_MESSAGE(child.exit_code != 1, "forbidden outcome observed: " << child.out);
    CHECK_MESSAGE(child.exit_code != 4, "the two sides never overlapped: " << child.out);
    CHECK(child.exit_code == 0);
  }
}

TEST_CASE("process barrier: the litmus test can fail: without the flush the forbidden outcome shows") {
  if (under_tsan) {
    MESSAGE("skipped under TSan: its instrumented atomics serialise the store buffer away");
    return;
  }
  // Until the forbidden outcome shows (milliseconds on a quiet machine); the budget is for
  // busy ones.
  auto o = store_buffering(
      false, [](const litmus_outcome& out) { return out.iterations >= 50'000'000; }, std::chrono::milliseconds(20000),
      true);
  INFO(describe(o));
  CHECK(o.forbidden > 0);
}

TEST_CASE("process barrier: prefers membarrier, falls back when it is denied, registering single-threaded") {
  auto child = run_fresh("automatic_choice", {{"PALRT_BARRIER="}, {}});
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  if (membarrier_available()) {
    CHECK(child.out.find("strategy=membarrier registered=1 registration_error=0 threads=1 forced=0") !=
          std::string::npos);
  } else {
#if defined(__x86_64__)
    CHECK(child.out.find("strategy=mprotect registered=0") != std::string::npos);
#else
    CHECK(child.out.find("strategy=signal registered=0") != std::string::npos);
#endif
    CHECK((child.out.find("registration_error=1 ") != std::string::npos ||   // EPERM
           child.out.find("registration_error=38 ") != std::string::npos));  // ENOSYS
  }
}

PALRT_FRESH_PROCESS(register_after_foreign_thread) {
  // A thread palrt did not start (the host's own, started before palrt was initialised).
  pal::wake_event release;
  pal::wake_event started;
  std::thread foreign([&] {
    started.set();
    release.wait();
  });
  started.wait();
  const int alive = pal::threads_in_process();  // 2, or 3 with a sanitizer's own thread
  const auto& st = pal::initialize_process_barrier();
  release.set();
  foreign.join();
  std::printf("registered=%d counted=%d slow=%d\n", st.registered, st.threads_at_registration == alive && alive >= 2,
              st.registration_ns > 200'000);
  return 0;
}

TEST_CASE("process barrier: a registration with a thread already alive is counted, not assumed") {
  if (!membarrier_available()) return;
  auto child = run_fresh("register_after_foreign_thread");
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  // The kernel took the slow path (a grace period), and the census says why: 2 threads.
  CHECK(child.out.find("registered=1 counted=1 slow=1") != std::string::npos);
}

PALRT_FRESH_PROCESS(mprotect_without_mlock) {
  // As in a container that denies mlock: the helper page must work unlocked.
  if (!palrt::testing::limit_unprivileged(RLIMIT_MEMLOCK, 0)) return 2;
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // The raw syscall: TSan's runtime intercepts mlock() and answers 0 without asking the
  // kernel (so under TSan palrt's own mlock "succeeds"; the barrier is exercised all the same).
  std::printf("mlock_denied=%d\n", syscall(SYS_mlock, probe, 4096) != 0);
  munmap(probe, 4096);
  if (!initialize_and_print_strategy()) return 3;
  auto o = store_buffering(
      true, [](const litmus_outcome& out) { return out.iterations >= 5000 && out.only_a_first > 0; },
      litmus_budget(), false);
  std::printf("%s\n", describe(o).c_str());
  return o.forbidden == 0 ? 0 : 1;
}

PALRT_FRESH_PROCESS(signal_taken_by_host) {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigaction(pal::barrier_signal_number(), &sa, nullptr);
  try {
    pal::make_barrier_instance(pal::barrier_strategy::signal);
    std::printf("created\n");
  } catch (const pal::barrier_error& e) {
    std::printf("error=%d what=%s\n", e.code().value(), e.what());
  }
  return 0;
}

TEST_CASE("process barrier: the mprotect strategy works where mlock is denied (RLIMIT_MEMLOCK 0)") {
  auto child = run_fresh("mprotect_without_mlock",
                         {[] {
                            auto env = palrt::testing::privilege_drop_env();
                            env.push_back("PALRT_BARRIER=mprotect");
                            return env;
                          }(),
                          {},
                          litmus_budget() + std::chrono::seconds(30)});
  INFO(child.out, child.err);
  CHECK(child.out.find("mlock_denied=1") != std::string::npos);
  CHECK(child.out.find("strategy=mprotect") != std::string::npos);
  CHECK(child.exit_code == 0);
}

TEST_CASE("process barrier: the signal strategy refuses a signal the host already handles") {
  auto child = run_fresh("signal_taken_by_host");
  INFO(child.out, child.err);
  REQUIRE(child.exit_code == 0);
  CHECK(child.out.find("error=" + std::to_string(EBUSY)) != std::string::npos);
}

TEST_CASE("process barrier: reports the strategy it chose and what a flush costs") {
  const auto& st = pal::initialize_process_barrier();
  CHECK(pal::parse_barrier_strategy(pal::to_string(st.strategy)) == st.strategy);
  CHECK(pal::process_barrier_state_if_initialized() == &st);
  const double ns = pal::measure_flush_cost_ns(50);
  CHECK(ns > 0);
  CHECK(ns < 1e8);  // a flush is microseconds; 100 ms would mean a hung strategy
}

TEST_CASE("process barrier: a bad PALRT_BARRIER value is an error that names the value") {
  auto child = run_fresh("litmus_with_flush", {{"PALRT_BARRIER=fence"}, {}});
  CHECK(child.exit_code == 3);
  CHECK(child.out.find("PALRT_BARRIER=fence") != std::string::npos);
  CHECK(child.out.find(std::to_string(EINVAL)) != std::string::npos);
}

TEST_CASE("process barrier: each strategy instance flushes with busy threads running, and reports its kind") {
  std::atomic<bool> stop{false};
  auto busy = pal::start_thread({"busy", 0}, [&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  for (auto s : {pal::barrier_strategy::membarrier, pal::barrier_strategy::mprotect, pal::barrier_strategy::signal}) {
    CAPTURE(pal::to_string(s));
    if (s == pal::barrier_strategy::membarrier && !membarrier_available()) {
      CHECK_THROWS_AS(pal::make_barrier_instance(s), pal::barrier_error);
      continue;
    }
    auto b = pal::make_barrier_instance(s);
    CHECK(b->strategy() == s);
    for (long i = 0; i < 200 * palrt::testing::scale(); ++i) b->flush();
  }
  stop = true;
  busy.join();
}

TEST_CASE("process barrier: the signal strategy does not wait forever for a thread that blocks its signal") {
  // A thread that blocks the signal and sleeps in the kernel needs no IPI: it passed a full
  // barrier when it was switched out. The flush must complete by noticing it is not running.
  pal::wake_event release;
  auto blocker = pal::start_thread({"blocks-signal", 0}, [&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, pal::barrier_signal_number());
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    release.wait();
  });
  auto b = pal::make_barrier_instance(pal::barrier_strategy::signal);
  auto t0 = std::chrono::steady_clock::now();
  b->flush();
  auto took = std::chrono::steady_clock::now() - t0;
  release.set();
  blocker.join();
  CHECK(took < std::chrono::seconds(2));
}

namespace {

pid_t gettid_now() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Waits until the thread sleeps in the kernel (the call it was started to block in): only
// the kernel can say so, hence a bounded poll of /proc. False if it never does.
bool wait_until_asleep(pid_t tid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (palrt::testing::thread_state(tid) != 'S') {
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();
  }
  return true;
}

}  // namespace

TEST_CASE("process barrier: the futex wrapper the strategies wait with returns 0 or the errno") {
  namespace in = palrt::pal::internal;
  std::atomic<std::uint32_t> word{1};
  CHECK(in::futex_wait(word, 0) == EAGAIN);  // the word is not 0: no sleep at all
  CHECK(in::futex_wait(word, 1, in::futex_deadline::after({0, 1'000'000})) == ETIMEDOUT);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  CHECK(in::futex_wait(word, 1, in::futex_deadline::at(now)) == ETIMEDOUT);  // already past
  CHECK(in::futex_wake(word, 1) == 0);                                       // nobody waits

  std::atomic<pid_t> waiter_tid{0};
  int result = -1;
  std::thread waiter([&] {
    waiter_tid.store(gettid_now(), std::memory_order_release);
    result = in::futex_wait(word, 1);
  });
  spin_until([&] { return waiter_tid.load(std::memory_order_acquire) != 0; });
  REQUIRE(wait_until_asleep(waiter_tid));
  word.store(2);
  CHECK(in::futex_wake(word, 1) == 1);
  waiter.join();
  CHECK(result == 0);
}

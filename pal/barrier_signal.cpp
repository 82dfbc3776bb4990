// Strategy 3: signal every other thread and wait until each has executed a full fence in
// its handler (musl's fallback when membarrier is missing; works on any architecture).
//
// Protocol, one round per flush, rounds serialised by round_mutex:
//   flusher: fence (A); list /proc/self/task; arm one target per other thread with the
//            round's generation g; set pending = targets; publish g; tgkill each target;
//            wait until pending is 0; fence (A').
//   handler: read g; fence (B); find its own tid; claim its target (g -> g + 1) and
//            decrement pending, waking the flusher when it reaches 0.
// A target that never acknowledges is not waited for forever when it needs no barrier:
// a thread that has exited, or one found not running (sleeping in the kernel: it passed a
// full barrier when it was switched out and passes another when switched back in, which is
// exactly the argument membarrier itself relies on). The flusher claims such a flag in the
// handler's place; the claim is a compare-exchange, so each target is counted once. A thread that runs with the signal
// blocked is waited for until it blocks in the kernel, unblocks the signal or exits.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "internal/barrier_strategies.hpp"
#include "internal/futex.hpp"

namespace palrt::pal::internal {
namespace {

// Each round has its own generation g (odd while the round runs). A target is armed with g
// and acknowledged by moving it to g + 1, so a handler that ran for an older round (its fence
// then predates this round) can never acknowledge a newer one.
struct target {
  std::atomic<pid_t> tid{0};
  std::atomic<std::uint64_t> armed{0};
};

// Tables are never freed, only replaced by larger ones: a handler interrupted mid-scan may
// still read the table of a round that has since ended.
struct target_table {
  explicit target_table(std::size_t n) : capacity(n), entries(new target[n]) {}
  const std::size_t capacity;
  std::atomic<std::size_t> count{0};
  std::unique_ptr<target[]> entries;
};

struct round_state {
  std::mutex round_mutex;
  int task_dir = -1;  // /proc/self/task, opened once
  std::vector<std::unique_ptr<target_table>> tables;  // every table ever made (see above)
  std::atomic<target_table*> table{nullptr};
  std::atomic<std::uint64_t> generation{0};           // odd while a round runs
  std::atomic<std::uint32_t> pending{0};              // futex word: targets not yet acknowledged
  bool installed = false;
};

round_state& state() {
  // Never destroyed: a handler may run during exit, after static destructors.
  static round_state* s = new round_state;  // NOLINT: intentional immortal singleton
  return *s;
}

pid_t current_tid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Claim a target for round g once, whoever gets there first (its handler or the flusher).
void acknowledge(round_state& s, target& t, std::uint64_t g) noexcept {
  std::uint64_t expected = g;
  // acq_rel: the handler's fence (B) happens before the flusher sees pending reach 0.
  if (!t.armed.compare_exchange_strong(expected, g + 1, std::memory_order_acq_rel)) return;
  if (s.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake(s.pending, 1);
}

void on_barrier_signal(int, siginfo_t*, void*) {
  int saved_errno = errno;
  round_state& s = state();
  // acquire: pairs with the flusher's release of g, so the fence below follows the start
  // of round g (and the flusher's fence (A)).
  std::uint64_t g = s.generation.load(std::memory_order_acquire);
  // (B) the full barrier this whole strategy exists to execute on this thread.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (g & 1) {
    target_table* t = s.table.load(std::memory_order_acquire);
    pid_t self = current_tid();
    std::size_t n = std::min(t->count.load(std::memory_order_acquire), t->capacity);
    for (std::size_t i = 0; i < n; ++i)
      if (t->entries[i].tid.load(std::memory_order_relaxed) == self) {
        acknowledge(s, t->entries[i], g);
        break;
      }
  }
  errno = saved_errno;
}

// Fills `out` with the tids of this process's threads. Returns 0 or an errno.
int list_threads(int dir_fd, std::vector<pid_t>& out) {
  out.clear();
  if (::lseek(dir_fd, 0, SEEK_SET) < 0) return errno;
  alignas(dirent64) char buf[4096];
  for (;;) {
    ssize_t n = ::getdents64(dir_fd, buf, sizeof buf);
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (ssize_t off = 0; off < n;) {
      auto* d = reinterpret_cast<dirent64*>(buf + off);
      off += d->d_reclen;
      pid_t tid = 0;
      const char* p = d->d_name;
      if (*p < '0' || *p > '9') continue;  // "." and ".."
      while (*p >= '0' && *p <= '9') tid = tid * 10 + (*p++ - '0');
      out.push_back(tid);
    }
  }
}

// True when the thread is not on a CPU right now: sleeping (S, D, I), stopped or a zombie.
bool thread_not_running(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // gone
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');  // comm may contain spaces and parens
  if (!close_paren || close_paren[1] != ' ') return false;
  return close_paren[2] != 'R';
}

class signal_barrier final : public barrier_instance {
 public:
  barrier_strategy strategy() const noexcept override { return barrier_strategy::signal; }

  void flush() noexcept override {
    round_state& s = state();
    std::lock_guard lock(s.round_mutex);
    // (A) order the caller's earlier accesses before the round; pairs with the handlers' (B).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (int err = list_threads(s.task_dir, tids_)) barrier_failed("signal", err);
    target_table* t = s.table.load(std::memory_order_relaxed);
    if (!t || t->capacity < tids_.size()) {
      s.tables.push_back(std::make_unique<target_table>(tids_.size() * 2 + 8));
      t = s.tables.back().get();
      s.table.store(t, std::memory_order_release);
    }
    const std::uint64_t g = s.generation.load(std::memory_order_relaxed) + 1;  // odd
    const pid_t self = current_tid();
    std::size_t n = 0;
    for (pid_t tid : tids_) {
      if (tid == self) continue;
      t->entries[n].tid.store(tid, std::memory_order_relaxed);
      t->entries[n].armed.store(g, std::memory_order_relaxed);
      ++n;
    }
    if (n == 0) return;
    s.pending.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    t->count.store(n, std::memory_order_relaxed);
    // release: a handler that reads g sees the armed table and pending above.
    s.generation.store(g, std::memory_order_release);

    const pid_t pid = ::getpid();
    for (std::size_t i = 0; i < n; ++i)
      if (::syscall(SYS_tgkill, pid, t->entries[i].tid.load(std::memory_order_relaxed),
                    barrier_signal_number()) != 0)
        acknowledge(s, t->entries[i], g);  // ESRCH: exited after the listing, needs no barrier

    wait_for_acknowledgements(s, *t, n, g);
    s.generation.store(g + 1, std::memory_order_release);
    // (A') the handlers' fences (B) happen before the caller's later accesses.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 private:
  static void wait_for_acknowledgements(round_state& s, target_table& t, std::size_t n, std::uint64_t g) {
    // Handlers normally answer within microseconds; past that, look for targets that need
    // no barrier (exited, or not running) instead of waiting on them.
    timespec slice{0, 200'000};
    for (;;) {
      std::uint32_t left = s.pending.load(std::memory_order_acquire);
      if (left == 0) return;
      // 0 (woken), EAGAIN (pending changed) and EINTR all mean: look again.
      if (futex_wait(s.pending, left, futex_deadline::after(slice)) != ETIMEDOUT) continue;
      for (std::size_t i = 0; i < n; ++i) {
        target& e = t.entries[i];
        if (e.armed.load(std::memory_order_acquire) == g &&
            thread_not_running(e.tid.load(std::memory_order_relaxed)))
          acknowledge(s, e, g);
      }
      if (slice.tv_nsec < 50'000'000) slice.tv_nsec *= 2;
    }
  }

  std::vector<pid_t> tids_;  // scratch, reused across flushes (guarded by round_mutex)
};

}  // namespace

std::unique_ptr<barrier_instance> make_signal_barrier() {
  round_state& s = state();
  std::lock_guard lock(s.round_mutex);
  if (!s.installed) {
    const int sig = barrier_signal_number();
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0)
      throw barrier_error(errno, std::generic_category(), "signal barrier: sigaction");
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != nullptr
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
      throw barrier_error(EBUSY, std::generic_category(),
                          "signal barrier: the host already handles SIGRTMAX-1");
    struct sigaction sa {};
    sa.sa_sigaction = &on_barrier_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(sig, &sa, nullptr) != 0)
      throw barrier_error(errno, std::generic_category(), "signal barrier: sigaction");
    s.task_dir = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.task_dir < 0) {
      int err = errno;
      ::sigaction(sig, &old, nullptr);
      throw barrier_error(err, std::generic_category(), "signal barrier: open /proc/self/task");
    }
    s.installed = true;
  }
  return std::make_unique<signal_barrier>();
}

}  // namespace palrt::pal::internal

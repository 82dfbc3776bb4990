// SPDX-License-Identifier: MIT
// Strategy 3: signal every other thread and wait until each has executed a full fence in
// its handler (musl's fallback when membarrier is missing; works on any architecture).
//
// Protocol, one round per flush (see "Listing" for when there are more), rounds serialised
// by round_mutex:
//   flusher: fence (A); list the process's threads; arm one target per other thread with
//            the round's generation g; set pending = targets; publish g; tgkill each target;
//            wait until pending is 0; ... further rounds ...; fence (A').
//   handler: read g; fence (B); find its own tid; claim its target (g -> g + 1) and
//            decrement pending, waking the flusher when it reaches 0.
// A target that never acknowledges is not waited for forever when it needs no barrier; the
// flusher then claims its flag in the handler's place (a compare-exchange, so each target is
// counted once). When it needs none is membarrier's own argument (kernel/sched/membarrier.c,
// Documentation/scheduler/membarrier.rst), which rests on the scheduler's barriers around
// rq->curr, not on the task state:
// - __schedule() executes a full barrier after the outgoing thread came from user space and
//   before it stores rq->curr (rq_lock(); smp_mb__after_spinlock()), and another after storing
//   rq->curr before the incoming thread returns to user space. So a thread that is off its
//   CPU passed a full barrier after its last user-space access and passes another before its
//   next one; membarrier(PRIVATE_EXPEDITED) reads each CPU's rq->curr after its own full
//   barrier and interrupts only the CPUs running this process.
// - palrt cannot read rq->curr. It reads /proc/<pid>/task/<tid>/syscall, which says
//   "running" unless the kernel found the thread neither on a CPU nor queued to run, twice,
//   under the thread's runqueue lock (task_current_syscall() -> wait_task_inactive()): the lock
//   __schedule() holds around those barriers and the store to rq->curr. Taking it after the
//   flusher's fence (A) orders the thread's switch-out, barrier included, before the check
//   (its next user-space access would need a wake-up and a switch-in, which take the same
//   locks after the check and pass the second barrier); fence (A') then orders the check
//   before the flusher's later accesses.
// - The task state (/proc/<tid>/stat, 'S' or 'D') proves neither: a thread sets it itself
//   before it calls schedule() (set_current_state()), and returns to user space without
//   switching out when the wait ends before it sleeps.
// - A thread that has exited (gone from the task directory) executed a full barrier on its
//   way out (exit_mm()'s mmput() is a fully ordered atomic) and runs no user code again.
// Where the syscall file cannot be read (it belongs to root in a process that is not dumpable,
// and a kernel without CONFIG_HAVE_ARCH_TRACEHOOK has none), nothing shows a thread off its
// CPU. A thread that runs with the signal blocked is thus waited for until it is seen off
// its CPU (asleep in the kernel), unblocks the signal or exits.
//
// Listing. The threads are read from /proc/<pid>/task, kept open, and what it lists must be
// the ids tgkill takes, that is the ids of this process's own PID namespace:
// - A fork()ed child inherits the descriptor, which still lists the parent's threads (or
//   nothing, once the parent is gone): the flusher reopens it whenever getpid() differs from
//   the pid it was opened for. getpid() is a syscall the flush makes anyway (tgkill's first
//   argument), where opening the directory on every flush would cost ~3 us, about as much
//   as a whole flush.
// - A /proc mounted for an ancestor PID namespace (unshare --pid --fork without
//   --mount-proc) lists the ancestor's ids, for which tgkill answers ESRCH. Opening checks
//   that the directory holds the caller under the id gettid() gives and that the caller's
//   NSpid there has a single level; make_signal_barrier() refuses otherwise (ESRCH). A flush
//   whose listing lacks its caller checks the same way: if the directory still holds the
//   caller, an exiting thread cut the listing short (below) and it lists again; if not, it
//   aborts rather than return with no barrier done.
// - A listing is not a snapshot: the kernel's walk of the thread list stops at a thread that
//   exited while it was being listed, so such a thread can hide the ones after it. A listed
//   thread that has exited answers tgkill with ESRCH; it counts as acknowledged only once it
//   is gone from the directory too, and after such a round the flusher lists again and runs
//   another round for the threads no round of this flush has covered yet. (A thread that
//   exits in the instant between the walk reaching it and its entry being written cuts the
//   listing short without that trace; that window is not covered.)
// - fork() waits for a round in progress (palrt's fork handlers take round_mutex, see
//   internal/fork_generation.hpp), so a child never starts with the lock held by a thread it
//   does not have, nor with a half-armed round.
// - tgkill fails with EAGAIN when the user's queue of pending signals is full
//   (RLIMIT_SIGPENDING; the barrier signal is a real-time one, so it is queued): no signal
//   was sent, so the target is sent it again while the flusher waits.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "palrt/pal/internal/barrier_strategies.hpp"
#include "palrt/pal/internal/futex.hpp"

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

// getdents64 buffer: ~1000 threads per call. Fewer calls mean fewer chances for an exiting
// thread to shift the position the next call resumes from.
constexpr std::size_t dirents_size = 32 * 1024;

struct round_state {
  std::mutex round_mutex;
  // This process's /proc/<pid>/task (see "Listing"), the getpid() it was opened for, and its
  // identity, by which a fork()ed child tells that the descriptor number it inherited still
  // holds that directory before closing it (the host may have closed and reused the number).
  int task_dir = -1;
  pid_t task_dir_pid = 0;
  dev_t task_dir_dev = 0;
  ino_t task_dir_ino = 0;
  std::unique_ptr<char[]> dirents;
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

// Whether the task directory holds the calling thread under `self`, its id in this
// process's PID namespace, and nothing shows it to be another namespace's /proc whose ids
// merely coincide: the thread's NSpid there lists one id per namespace level from /proc's
// down to the thread's own, so a single id means /proc is this namespace's. 0, or an errno
// with *why saying what is wrong.
int check_lists_caller(int dir_fd, pid_t self, const char** why) {
  char name[32];
  std::snprintf(name, sizeof name, "%d/status", static_cast<int>(self));
  int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      *why = "open /proc/self/task/<tid>/status";
      return errno;
    }
    *why =
        "/proc/self/task does not list the calling thread under its thread id: /proc belongs to another PID "
        "namespace (mount this namespace's own, e.g. unshare --pid --fork --mount-proc)";
    return ESRCH;
  }
  char buf[4096];
  std::size_t len = 0;
  for (ssize_t n; len < sizeof buf - 1 && (n = ::read(fd, buf + len, sizeof buf - 1 - len)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      *why = "read /proc/self/task/<tid>/status";
      return err;
    }
    len += static_cast<std::size_t>(n);
  }
  ::close(fd);
  buf[len] = '\0';
  // No NSpid line: a kernel without PID namespaces, where ids cannot differ.
  const char* line = std::strstr(buf, "\nNSpid:");
  if (!line) return 0;
  int ids = 0;
  for (const char* p = line + 7; *p && *p != '\n';) {
    if (*p >= '0' && *p <= '9') {
      ++ids;
      while (*p >= '0' && *p <= '9') ++p;
    } else {
      ++p;
    }
  }
  if (ids > 1) {
    *why =
        "/proc belongs to an ancestor PID namespace: it lists thread ids that tgkill does not take in this one "
        "(mount this namespace's own, e.g. unshare --pid --fork --mount-proc)";
    return ESRCH;
  }
  return 0;
}

// Opens the calling process's task directory and checks it (above); on success it replaces
// the one held, which a fork()ed child inherited from its parent. 0, or an errno and *why.
int open_task_dir(round_state& s, pid_t pid, pid_t self, const char** why) {
  int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *why = "open /proc/self/task";
    return errno;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    *why = "fstat /proc/self/task";
    return err;
  }
  if (int err = check_lists_caller(fd, self, why)) {
    ::close(fd);
    return err;
  }
  struct stat old {};
  if (s.task_dir >= 0 && ::fstat(s.task_dir, &old) == 0 && old.st_dev == s.task_dir_dev &&
      old.st_ino == s.task_dir_ino)
    ::close(s.task_dir);
  s.task_dir = fd;
  s.task_dir_pid = pid;
  s.task_dir_dev = st.st_dev;
  s.task_dir_ino = st.st_ino;
  return 0;
}

// Fills `out` with the tids the task directory lists. Returns 0 or an errno.
int list_threads(round_state& s, std::vector<pid_t>& out) {
  out.clear();
  if (::lseek(s.task_dir, 0, SEEK_SET) < 0) return errno;
  char* buf = s.dirents.get();
  for (;;) {
    ssize_t n = ::getdents64(s.task_dir, buf, dirents_size);
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

// After tgkill said ESRCH: whether the task directory agrees the thread is gone. It may not,
// for an id that is not this namespace's; then the thread is left to the wait below.
bool thread_gone(int dir_fd, pid_t tid) {
  char name[16];
  std::snprintf(name, sizeof name, "%d", static_cast<int>(tid));
  struct stat st {};
  return ::fstatat(dir_fd, name, &st, 0) != 0 && errno == ENOENT;
}

// True when the kernel shows the thread needs no barrier (see the top of this file): found off
// its CPU under its runqueue lock (its syscall file reads anything but "running"), or gone
// from the task directory. False when nothing shows it, the syscall file unreadable included.
bool thread_off_cpu(int dir_fd, pid_t tid) {
  char name[32];
  std::snprintf(name, sizeof name, "%d/syscall", static_cast<int>(tid));
  int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT && thread_gone(dir_fd, tid);  // or a kernel without the file
  char buf[16];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  // A blocked thread's line starts with its syscall number, or -1 outside a syscall.
  constexpr char running[] = "running";
  return n > 0 && !(static_cast<std::size_t>(n) >= sizeof running - 1 && std::memcmp(buf, running, sizeof running - 1) == 0);
}

// A flush that cannot reach every thread must not return as if it had: it aborts, saying why.
[[noreturn]] void flush_impossible(const char* why, int err) noexcept {
  std::fprintf(stderr, "palrt: signal process barrier: %s\n", why);
  barrier_failed("signal", err);
}

class signal_barrier final : public barrier_instance {
 public:
  barrier_strategy strategy() const noexcept override { return barrier_strategy::signal; }

  void flush() noexcept override {
    round_state& s = state();
    std::lock_guard lock(s.round_mutex);
    // (A) order the caller's earlier accesses before the round; pairs with the handlers' (B).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const pid_t pid = ::getpid();
    const pid_t self = current_tid();
    const char* why = "";
    if (pid != s.task_dir_pid)  // a fork()ed child, holding its parent's directory
      if (int err = open_task_dir(s, pid, self, &why)) flush_impossible(why, err);
    list_own_threads(s, self);
    covered_.clear();
    for (;;) {
      targets_.clear();
      for (pid_t tid : tids_)
        if (tid != self && !std::binary_search(covered_.begin(), covered_.end(), tid)) targets_.push_back(tid);
      if (targets_.empty()) break;
      if (!run_round(s, pid)) break;
      // The listing may have stopped at the thread that exited: list again, and cover the
      // threads no round has (a thread started since needs no barrier, but is harmless).
      covered_.insert(covered_.end(), targets_.begin(), targets_.end());
      std::sort(covered_.begin(), covered_.end());
      list_own_threads(s, self);
    }
    // (A') the handlers' fences (B) happen before the caller's later accesses.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 private:
  // Lists the threads into tids_, which must include the caller's own id: a listing without
  // it was either cut short by a thread exiting (list again) or is not this namespace's
  // (then no signal can reach the others: abort).
  void list_own_threads(round_state& s, pid_t self) {
    for (;;) {
      if (int err = list_threads(s, tids_)) barrier_failed("signal", err);
      if (std::find(tids_.begin(), tids_.end(), self) != tids_.end()) return;
      const char* why = "";
      if (int err = check_lists_caller(s.task_dir, self, &why)) flush_impossible(why, err);
    }
  }

  // One round over targets_. Returns whether a target answered ESRCH (it exited, so the
  // listing may have missed threads after it).
  bool run_round(round_state& s, pid_t pid) {
    target_table* t = s.table.load(std::memory_order_relaxed);
    if (!t || t->capacity < targets_.size()) {
      s.tables.push_back(std::make_unique<target_table>(targets_.size() * 2 + 8));
      t = s.tables.back().get();
      s.table.store(t, std::memory_order_release);
    }
    const std::uint64_t g = s.generation.load(std::memory_order_relaxed) + 1;  // odd
    const std::size_t n = targets_.size();
    for (std::size_t i = 0; i < n; ++i) {
      t->entries[i].tid.store(targets_[i], std::memory_order_relaxed);
      t->entries[i].armed.store(g, std::memory_order_relaxed);
    }
    s.pending.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    t->count.store(n, std::memory_order_relaxed);
    // release: a handler that reads g sees the armed table and pending above.
    s.generation.store(g, std::memory_order_release);
    run_flush_hook();

    unsent_.assign(n, 0);
    someone_exited_ = false;
    for (std::size_t i = 0; i < n; ++i) unsent_[i] = !send(s, pid, *t, i, g);

    wait_for_acknowledgements(s, pid, *t, n, g);
    s.generation.store(g + 1, std::memory_order_release);
    return someone_exited_;
  }

  // tgkill to target i; false when it must be sent again. ESRCH notes that a thread exited
  // and acknowledges it once the task directory confirms it is gone; EAGAIN (no room to
  // queue the signal) leaves it to be sent again; anything else means no thread can be
  // signalled, and aborts.
  bool send(round_state& s, pid_t pid, target_table& t, std::size_t i, std::uint64_t g) {
    target& e = t.entries[i];
    const pid_t tid = e.tid.load(std::memory_order_relaxed);
    if (::syscall(SYS_tgkill, pid, tid, barrier_signal_number()) == 0) return true;
    const int err = errno;
    if (err == EAGAIN) return false;
    if (err != ESRCH) barrier_failed("signal", err);
    someone_exited_ = true;
    if (thread_gone(s.task_dir, tid)) acknowledge(s, e, g);
    return true;
  }

  void wait_for_acknowledgements(round_state& s, pid_t pid, target_table& t, std::size_t n, std::uint64_t g) {
    // Handlers normally answer within microseconds; past that, look for targets that need
    // no barrier (exited, or off their CPU) instead of waiting on them, and send again what
    // could not be sent.
    timespec slice{0, 200'000};
    for (;;) {
      std::uint32_t left = s.pending.load(std::memory_order_acquire);
      if (left == 0) return;
      // 0 (woken), EAGAIN (pending changed) and EINTR all mean: look again.
      if (futex_wait(s.pending, left, futex_deadline::after(slice)) != ETIMEDOUT) continue;
      for (std::size_t i = 0; i < n; ++i) {
        target& e = t.entries[i];
        // acquire: a target found claimed had its fence (B) done before the claim.
        if (e.armed.load(std::memory_order_acquire) != g) continue;
        if (unsent_[i]) unsent_[i] = !send(s, pid, t, i, g);
        if (thread_off_cpu(s.task_dir, e.tid.load(std::memory_order_relaxed))) acknowledge(s, e, g);
      }
      if (slice.tv_nsec < 50'000'000) slice.tv_nsec *= 2;
    }
  }

  // Scratch, reused across flushes (guarded by round_mutex).
  std::vector<pid_t> tids_;     // the latest listing
  std::vector<pid_t> targets_;  // this round's targets
  std::vector<pid_t> covered_;  // sorted: the targets of this flush's earlier rounds
  std::vector<char> unsent_;    // per target of this round: tgkill found the queue full
  bool someone_exited_ = false;  // this round: a target answered ESRCH
};

}  // namespace

std::mutex& signal_round_lock() { return state().round_mutex; }

std::unique_ptr<barrier_instance> make_signal_barrier() {
  round_state& s = state();
  std::lock_guard lock(s.round_mutex);
  const int sig = barrier_signal_number();
  struct sigaction old {};
  const bool install = !s.installed;
  if (install) {
    if (::sigaction(sig, nullptr, &old) != 0)
      throw barrier_error(errno, std::generic_category(), "signal barrier: sigaction");
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != nullptr
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
      throw barrier_error(EBUSY, std::generic_category(),
                          "signal barrier: the host already handles SIGRTMAX-1");
    if (!s.dirents) s.dirents = std::make_unique<char[]>(dirents_size);
    struct sigaction sa {};
    sa.sa_sigaction = &on_barrier_signal;
    // SA_RESTART: a host thread blocked in a restartable call (read, write, wait, recv
    // without a timeout, futex waits without a timeout...) goes back to it after the handler
    // instead of failing with EINTR. The calls signal(7) lists as never restarted still fail
    // with EINTR on every flush; process_barrier.hpp lists them for hosts.
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(sig, &sa, nullptr) != 0)
      throw barrier_error(errno, std::generic_category(), "signal barrier: sigaction");
  }
  // On every call, not only the first: a fork()ed child making an instance of its own
  // reopens here, and is refused here rather than at its first flush.
  const pid_t pid = ::getpid();
  if (pid != s.task_dir_pid) {
    const char* why = "";
    if (int err = open_task_dir(s, pid, current_tid(), &why)) {
      if (install) ::sigaction(sig, &old, nullptr);
      throw barrier_error(err, std::generic_category(), std::string("signal barrier: ") + why);
    }
  }
  s.installed = true;
  return std::make_unique<signal_barrier>();
}

}  // namespace palrt::pal::internal

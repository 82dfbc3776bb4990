// SPDX-License-Identifier: MIT
// Strategy 3: signal every other thread and wait until each has executed a full fence in
// its handler (musl's fallback when membarrier is missing; works on any architecture).
//
// Protocol, one round per flush (see "Listing" for when there are more), rounds serialised
// by round_mutex (but see "Nesting"):
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
//
// Nesting. A flush may run in a signal handler (process_barrier.hpp), and that handler may
// have interrupted a flush on its own thread, with round_mutex held and a round half armed,
// half sent or waited for: waiting for round_mutex there would wait forever. round_mutex is
// an owned_mutex, so the handler's flush sees that its own thread holds it, and runs without
// it, in a slot of its own: each nesting depth d (0 for a flush that took the lock, d for the
// d-th flush nested in handlers on the holder's thread) has its own round state (generation,
// table, pending count) and its own task directory descriptor and scratch, so a nested flush
// changes nothing the flush it interrupted is using, not even a directory's file position.
// Why that is sound:
// - Exclusive use. Only the holder's thread runs flushes while round_mutex is held (every
//   other thread waits for it), and a flush nested on that thread runs to its end before the
//   one it interrupted resumes (a handler returns before the code it interrupted goes on), so
//   slot d is used by one flush at a time, as slot 0 is under the lock. `nested`, the depth
//   of the innermost flush running on the holder's thread, is touched only there, and is 0
//   again before the holder releases the lock (release/acquire on round_mutex hand it over).
// - Each slot's round is a whole round: the flusher's fences (A) and (A') are its own, and a
//   handler acknowledges every slot armed for it, after one fence (B) that follows its reads
//   of all the generations (a handler that runs once for two rounds fenced after both began).
//   So the nested flush returns only when every other thread fenced after it began, or was
//   seen off its CPU or gone after its (A), and the interrupted round is untouched: it goes on
//   when the handler returns, acknowledged by the same handler runs or by its own signals.
// - A handler may miss a slot whose first use began after it read `slots_in_use`, but not one
//   whose round sent it its signal: the flusher stores `slots_in_use` (release) before it
//   publishes that round, and the kernel takes the target's signal lock both to queue the
//   signal and to deliver it, so what the sender wrote before tgkill is visible to the handler
//   (the same order that makes the handler see the generation published before tgkill).
// - Nothing a flush does may take a lock or allocate with malloc, since a handler may have
//   interrupted either: scratch grows with mmap and mremap (system calls), tables are mapped
//   and never unmapped, messages are written with write(2) (signal_safe_message.hpp).
// Depth is bounded (max_depth): a flush nested deeper aborts with a message rather than wait.
//
// The signal taken away. The handler must stay palrt's: a host that later installs SIG_IGN
// for the barrier signal, or a handler of its own that does not call palrt's, leaves no
// running thread able to acknowledge a round, and every flush would wait for good; SIG_DFL
// would end the process at the first signal. So each flush reads the signal's disposition
// (one sigaction call) before it sends anything, and again whenever its wait times out (a
// host that changes it during the flush), and aborts with a message that names what holds the
// signal now: at once for SIG_IGN and SIG_DFL, which never reach palrt's handler; for
// another handler only once the flush has waited `chained_patience_ns` without an
// acknowledgement, since a host handler that calls palrt's (chains to the handler it
// replaced, as signal-chaining libraries do) keeps the strategy working. The message says whether that handler lies in
// another copy of palrt (an object that carries palrt's note: process_copies.hpp), whose own
// signal strategy uses the same signal, or elsewhere (its address and object). A second copy
// that initialises the strategy while the first holds the signal is refused the same way,
// naming both copies (make_signal_barrier()). Taking the signal back instead would silently
// break whatever the host installed its handler for.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "palrt/pal/internal/barrier_strategies.hpp"
#include "palrt/pal/internal/futex.hpp"
#include "palrt/pal/internal/owned_mutex.hpp"
#include "palrt/pal/internal/process_copies.hpp"
#include "palrt/pal/internal/signal_safe_message.hpp"

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
// still read the table of a round that has since ended. Mapped (map_table()), since a flush
// may grow one in a signal handler.
struct target_table {
  std::size_t capacity = 0;
  std::atomic<std::size_t> count{0};
  target* entries = nullptr;
};

std::size_t page_rounded(std::size_t bytes) noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// A table for n targets in memory of its own, or nullptr (ENOMEM).
target_table* map_table(std::size_t n) noexcept {
  const std::size_t header = (sizeof(target_table) + alignof(target) - 1) / alignof(target) * alignof(target);
  void* p = ::mmap(nullptr, page_rounded(header + n * sizeof(target)), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* t = new (p) target_table;
  t->capacity = n;
  t->entries = reinterpret_cast<target*>(static_cast<char*>(p) + header);
  for (std::size_t i = 0; i < n; ++i) new (&t->entries[i]) target;
  return t;
}

// A growable array of trivially copyable T in memory mapped straight from the kernel, for
// the flush's scratch (see "Nesting": malloc is off limits in a flush). push_back() and
// reserve() return false when the kernel has no memory left. Never shrinks; never unmapped
// (the round state lives until the process ends).
template <class T>
class mapped_array {
 public:
  bool reserve(std::size_t n) noexcept {
    if (n <= capacity_) return true;
    const std::size_t old_bytes = capacity_ * sizeof(T);
    const std::size_t bytes = page_rounded(std::max(n, 2 * capacity_) * sizeof(T));
    void* p = data_ ? ::mremap(data_, old_bytes, bytes, MREMAP_MAYMOVE)
                    : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<T*>(p);
    capacity_ = bytes / sizeof(T);
    return true;
  }
  bool push_back(T value) noexcept {
    if (size_ == capacity_ && !reserve(size_ + 1)) return false;
    data_[size_++] = value;
    return true;
  }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// getdents64 buffer: ~1000 threads per call. Fewer calls mean fewer chances for an exiting
// thread to shift the position the next call resumes from.
constexpr std::size_t dirents_size = 32 * 1024;

// The flushes at one nesting depth (see "Nesting"): depth 0 is a flush that took
// round_mutex, depth d the d-th flush nested in signal handlers on the thread that holds it.
struct round_slot {
  // This process's /proc/<pid>/task (see "Listing"), the getpid() it was opened for, and its
  // identity, by which a fork()ed child tells that the descriptor number it inherited still
  // holds that directory before closing it (the host may have closed and reused the number).
  int task_dir = -1;
  pid_t task_dir_pid = 0;
  dev_t task_dir_dev = 0;
  ino_t task_dir_ino = 0;
  char* dirents = nullptr;  // dirents_size bytes, mapped with the first directory opened
  std::atomic<target_table*> table{nullptr};
  std::atomic<std::uint64_t> generation{0};  // odd while a round runs
  std::atomic<std::uint32_t> pending{0};     // futex word: targets not yet acknowledged
  // Scratch, reused across this slot's flushes.
  mapped_array<pid_t> tids;     // the latest listing
  mapped_array<pid_t> targets;  // this round's targets
  mapped_array<pid_t> covered;  // sorted: the targets of this flush's earlier rounds
  mapped_array<char> unsent;    // per target of this round: tgkill found the queue full
  bool someone_exited = false;  // this round: a target answered ESRCH
};

// How many flushes one thread may nest (a flush, and one in each handler that interrupts the
// last): more than a host has signals that flush and interrupt each other.
constexpr int max_depth = 8;

struct round_state {
  owned_mutex round_mutex;
  // The depth of the innermost nested flush on round_mutex's holder (0: none). relaxed
  // everywhere: only that thread and its handlers touch it (see "Nesting").
  std::atomic<int> nested{0};
  // How many slots handlers look at: 1 + the deepest nesting ever (only grows). Written by
  // round_mutex's holder before the slot's first round (release, see "Nesting").
  std::atomic<int> slots_in_use{1};
  round_slot slots[max_depth];
  bool installed = false;
};

// Never destroyed: a handler may run during exit, after static destructors. Constant-
// initialised, not allocated: every process start names round_mutex (the process barrier
// holds it across fork() whatever its strategy), and a heap allocation of it there touched
// a fresh page of the heap in processes that never use this strategy (a page's first touch
// costs 9-16 us on the VMs palrt is measured on; issue 27).
union immortal_round_state {
  round_state s;
  constexpr immortal_round_state() : s() {}
  ~immortal_round_state() {}
};
constinit immortal_round_state the_round_state;

round_state& state() { return the_round_state.s; }

// Claim a target for round g once, whoever gets there first (its handler or the flusher).
void acknowledge(round_slot& slot, target& t, std::uint64_t g) noexcept {
  std::uint64_t expected = g;
  // acq_rel: the handler's fence (B) happens before the flusher sees pending reach 0.
  if (!t.armed.compare_exchange_strong(expected, g + 1, std::memory_order_acq_rel)) return;
  if (slot.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake(slot.pending, 1);
}

void on_barrier_signal(int, siginfo_t*, void*) {
  int saved_errno = errno;
  round_state& s = state();
  // acquire: pairs with the release that stores it before a new slot's first round.
  const int slots = std::min(s.slots_in_use.load(std::memory_order_acquire), max_depth);
  std::uint64_t g[max_depth];
  bool any_round = false;
  for (int d = 0; d < slots; ++d) {
    // acquire: pairs with the flusher's release of g, so the fence below follows the start
    // of round g (and the flusher's fence (A)).
    g[d] = s.slots[d].generation.load(std::memory_order_acquire);
    any_round |= (g[d] & 1) != 0;
  }
  // (B) the full barrier this whole strategy exists to execute on this thread.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (any_round) {
    const pid_t self = owned_mutex::current_tid();
    for (int d = 0; d < slots; ++d) {
      if (!(g[d] & 1)) continue;
      round_slot& slot = s.slots[d];
      target_table* t = slot.table.load(std::memory_order_acquire);
      std::size_t n = std::min(t->count.load(std::memory_order_acquire), t->capacity);
      for (std::size_t i = 0; i < n; ++i)
        if (t->entries[i].tid.load(std::memory_order_relaxed) == self) {
          acknowledge(slot, t->entries[i], g[d]);
          break;
        }
    }
  }
  errno = saved_errno;
}

// "<tid><suffix>" into buf, a name relative to the task directory (snprintf is not
// async-signal-safe).
template <std::size_t N>
const char* tid_name(char (&buf)[N], pid_t tid, const char* suffix) noexcept {
  char digits[16];
  int n = 0;
  auto v = static_cast<unsigned>(tid);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  std::size_t len = 0;
  while (n > 0) buf[len++] = digits[--n];
  for (; *suffix && len < N - 1; ++suffix) buf[len++] = *suffix;
  buf[len] = '\0';
  return buf;
}

// Whether the task directory holds the calling thread under `self`, its id in this
// process's PID namespace, and nothing shows it to be another namespace's /proc whose ids
// merely coincide: the thread's NSpid there lists one id per namespace level from /proc's
// down to the thread's own, so a single id means /proc is this namespace's. 0, or an errno
// with *why saying what is wrong. `slot`'s dirents buffer holds the status file meanwhile (a
// flush in a signal handler may have little stack).
int check_lists_caller(round_slot& slot, int dir_fd, pid_t self, const char** why) {
  char name[32];
  int fd = ::openat(dir_fd, tid_name(name, self, "/status"), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      *why = "open /proc/self/task/<tid>/status";
      return errno;
    }
    *why = "/proc/self/task does not list the calling thread under its thread id: /proc belongs to another PID "
           "namespace (mount this namespace's own, e.g. unshare --pid --fork --mount-proc)";
    return ESRCH;
  }
  char* buf = slot.dirents;
  constexpr std::size_t buf_size = dirents_size;
  std::size_t len = 0;
  for (ssize_t n; len < buf_size - 1 && (n = ::read(fd, buf + len, buf_size - 1 - len)) != 0;) {
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
    *why = "/proc belongs to an ancestor PID namespace: it lists thread ids that tgkill does not take in this one "
           "(mount this namespace's own, e.g. unshare --pid --fork --mount-proc)";
    return ESRCH;
  }
  return 0;
}

// Opens the calling process's task directory and checks it (above); on success it replaces
// the one the slot held, which a fork()ed child inherited from its parent. Maps the slot's
// dirents buffer the first time. 0, or an errno and *why.
int open_task_dir(round_slot& slot, pid_t pid, pid_t self, const char** why) {
  if (!slot.dirents) {
    void* p = ::mmap(nullptr, dirents_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      *why = "map a buffer for /proc/self/task";
      return errno;
    }
    slot.dirents = static_cast<char*>(p);
  }
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
  if (int err = check_lists_caller(slot, fd, self, why)) {
    ::close(fd);
    return err;
  }
  struct stat old {};
  if (slot.task_dir >= 0 && ::fstat(slot.task_dir, &old) == 0 && old.st_dev == slot.task_dir_dev &&
      old.st_ino == slot.task_dir_ino)
    ::close(slot.task_dir);
  slot.task_dir = fd;
  slot.task_dir_pid = pid;
  slot.task_dir_dev = st.st_dev;
  slot.task_dir_ino = st.st_ino;
  return 0;
}

// Fills `out` with the tids the task directory lists. Returns 0 or an errno.
int list_threads(round_slot& slot, mapped_array<pid_t>& out) {
  out.clear();
  if (::lseek(slot.task_dir, 0, SEEK_SET) < 0) return errno;
  char* buf = slot.dirents;
  for (;;) {
    ssize_t n = ::getdents64(slot.task_dir, buf, dirents_size);
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (ssize_t off = 0; off < n;) {
      auto* d = reinterpret_cast<dirent64*>(buf + off);
      off += d->d_reclen;
      pid_t tid = 0;
      const char* p = d->d_name;
      if (*p < '0' || *p > '9') continue;  // "." and ".."
      while (*p >= '0' && *p <= '9') tid = tid * 10 + (*p++ - '0');
      if (!out.push_back(tid)) return ENOMEM;
    }
  }
}

// After tgkill said ESRCH: whether the task directory agrees the thread is gone. It may not,
// for an id that is not this namespace's; then the thread is left to the wait below.
bool thread_gone(int dir_fd, pid_t tid) {
  char name[16];
  struct stat st {};
  return ::fstatat(dir_fd, tid_name(name, tid, ""), &st, 0) != 0 && errno == ENOENT;
}

// True when the kernel shows the thread needs no barrier (see the top of this file): found off
// its CPU under its runqueue lock (its syscall file reads anything but "running"), or gone
// from the task directory. False when nothing shows it, the syscall file unreadable included.
bool thread_off_cpu(int dir_fd, pid_t tid) {
  char name[32];
  int fd = ::openat(dir_fd, tid_name(name, tid, "/syscall"), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT && thread_gone(dir_fd, tid);  // or a kernel without the file
  char buf[16];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  // A blocked thread's line starts with its syscall number, or -1 outside a syscall.
  constexpr char running[] = "running";
  return n > 0 &&
         !(static_cast<std::size_t>(n) >= sizeof running - 1 && std::memcmp(buf, running, sizeof running - 1) == 0);
}

// A flush that cannot reach every thread must not return as if it had: it aborts, saying why.
[[noreturn]] void flush_impossible(const char* why, int err) noexcept {
  (signal_safe_message() << "palrt: signal process barrier: " << why).write_line();
  barrier_failed("signal", err);
}

// What a handler's address points into, for messages: the object's path and whether it holds
// a copy of palrt other than this one. Paths are cut short at 1 KiB: a flush in a signal
// handler may have little stack.
constexpr std::size_t message_path_size = 1024;
struct handler_owner {
  char path[message_path_size];
  bool found = false;
  bool other_copy = false;
};

void find_owner(const void* handler, handler_owner& owner) noexcept {
  bool copy = false;
  owner.found = object_holding(handler, owner.path, sizeof owner.path, &copy);
  char mine[message_path_size];
  object_holding(reinterpret_cast<const void*>(&on_barrier_signal), mine, sizeof mine, nullptr);
  // A handler in this copy's own object that is not palrt's is the host's, even though that
  // object carries palrt's note: the host linked palrt in statically.
  owner.other_copy = owner.found && copy && std::strcmp(owner.path, mine) != 0;
}

const void* handler_address(const struct sigaction& sa) noexcept {
  return (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<const void*>(sa.sa_sigaction)
                                    : reinterpret_cast<const void*>(sa.sa_handler);
}

// How long a flush waits without an acknowledgement before it takes another handler of the
// barrier signal for the cause (see "The signal taken away"): far longer than a preempted
// target takes to run (a time slice, milliseconds).
constexpr std::int64_t chained_patience_ns = 1'000'000'000;

std::int64_t monotonic_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Aborts, naming what holds the barrier signal now (see "The signal taken away"), when it
// is ignored or has its default action, or when another handler holds it and
// `foreign_handler_fatal` (the flush has waited for it long enough). One sigaction call.
void check_disposition(bool foreign_handler_fatal) noexcept {
  const int sig = barrier_signal_number();
  struct sigaction now {};
  if (::sigaction(sig, nullptr, &now) != 0) return;  // cannot fail for a valid signal
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == &on_barrier_signal) return;
  const bool ignored = !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN;
  const bool by_default = !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL;
  if (!ignored && !by_default && !foreign_handler_fatal) return;  // it may call palrt's
  signal_safe_message m;
  m << "palrt: signal process barrier: its signal, SIGRTMAX-1 (" << sig << "), ";
  if (ignored) {
    m << "is ignored now (SIG_IGN): the host ignored it after palrt installed its handler, so no running "
         "thread can acknowledge a flush";
  } else if (by_default) {
    m << "has its default action again (SIG_DFL), which ends the process: the host reset it after palrt "
         "installed its handler";
  } else {
    handler_owner owner;
    find_owner(handler_address(now), owner);
    if (owner.other_copy) {
      m << "is handled now by another copy of palrt, in " << owner.path
        << ": two copies of palrt in one process cannot both use the signal strategy; link every module of the "
           "process against libpalrt.so";
    } else {
      m << "is handled now by another handler (" << handler_address(now) << ", in "
        << (owner.found ? owner.path : "no loaded object") << "), and a flush waited "
        << static_cast<long>(chained_patience_ns / 1'000'000)
        << " ms for a running thread's acknowledgement: the host installed that handler after palrt installed "
           "its own, and it does not call palrt's";
    }
  }
  m << "; leave that signal to palrt, or give palrt another barrier (membarrier, or PALRT_BARRIER=mprotect)";
  m.write_line();
  barrier_failed("signal", EBUSY);
}

class signal_barrier final : public barrier_instance {
 public:
  barrier_strategy strategy() const noexcept override { return barrier_strategy::signal; }

  void flush() noexcept override {
    round_state& s = state();
    const pid_t self = owned_mutex::current_tid();
    if (s.round_mutex.held_by(self)) {
      // A handler that interrupted a flush on this thread (see "Nesting"). relaxed: only this
      // thread and its handlers touch `nested`; the signal fences keep the slot's use inside.
      const int depth = s.nested.fetch_add(1, std::memory_order_relaxed) + 1;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (depth >= max_depth)
        flush_impossible("a flush nested more than 7 deep in signal handlers that interrupted flushes", EDEADLK);
      // relaxed load: only round_mutex's holder writes it.
      if (s.slots_in_use.load(std::memory_order_relaxed) <= depth)
        s.slots_in_use.store(depth + 1, std::memory_order_release);  // release: see "Nesting"
      flush_in(s.slots[depth], self);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      s.nested.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    s.round_mutex.lock(self);
    flush_in(s.slots[0], self);
    s.round_mutex.unlock();
  }

 private:
  // One flush in `slot`, which this call has to itself (see "Nesting").
  static void flush_in(round_slot& slot, pid_t self) noexcept {
    // (A) order the caller's earlier accesses before the round; pairs with the handlers' (B).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    check_disposition(/*foreign_handler_fatal=*/false);
    const pid_t pid = ::getpid();
    const char* why = "";
    if (pid != slot.task_dir_pid)  // first use of the slot, or a fork()ed child holding its parent's directory
      if (int err = open_task_dir(slot, pid, self, &why)) flush_impossible(why, err);
    list_own_threads(slot, self);
    slot.covered.clear();
    for (;;) {
      slot.targets.clear();
      for (pid_t tid : slot.tids)
        if (tid != self && !std::binary_search(slot.covered.begin(), slot.covered.end(), tid))
          if (!slot.targets.push_back(tid)) barrier_failed("signal", ENOMEM);
      if (slot.targets.empty()) break;
      if (!run_round(slot, pid)) break;
      // The listing may have stopped at the thread that exited: list again, and cover the
      // threads no round has (a thread started since needs no barrier, but is harmless).
      for (pid_t tid : slot.targets)
        if (!slot.covered.push_back(tid)) barrier_failed("signal", ENOMEM);
      std::sort(slot.covered.begin(), slot.covered.end());
      list_own_threads(slot, self);
    }
    // (A') the handlers' fences (B) happen before the caller's later accesses.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  // Lists the threads into slot.tids, which must include the caller's own id: a listing
  // without it was either cut short by a thread exiting (list again) or is not this
  // namespace's (then no signal can reach the others: abort).
  static void list_own_threads(round_slot& slot, pid_t self) {
    for (;;) {
      if (int err = list_threads(slot, slot.tids)) barrier_failed("signal", err);
      if (std::find(slot.tids.begin(), slot.tids.end(), self) != slot.tids.end()) return;
      const char* why = "";
      if (int err = check_lists_caller(slot, slot.task_dir, self, &why)) flush_impossible(why, err);
    }
  }

  // One round over slot.targets. Returns whether a target answered ESRCH (it exited, so the
  // listing may have missed threads after it).
  static bool run_round(round_slot& slot, pid_t pid) {
    const std::size_t n = slot.targets.size();
    target_table* t = slot.table.load(std::memory_order_relaxed);
    if (!t || t->capacity < n) {
      t = map_table(n * 2 + 8);
      if (!t) barrier_failed("signal", ENOMEM);
      // release: a handler that loads it sees its entries constructed.
      slot.table.store(t, std::memory_order_release);
    }
    const std::uint64_t g = slot.generation.load(std::memory_order_relaxed) + 1;  // odd
    for (std::size_t i = 0; i < n; ++i) {
      t->entries[i].tid.store(slot.targets[i], std::memory_order_relaxed);
      t->entries[i].armed.store(g, std::memory_order_relaxed);
    }
    slot.pending.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    t->count.store(n, std::memory_order_relaxed);
    // release: a handler that reads g sees the armed table and pending above.
    slot.generation.store(g, std::memory_order_release);
    run_flush_hook();

    slot.unsent.clear();
    slot.someone_exited = false;
    for (std::size_t i = 0; i < n; ++i)
      if (!slot.unsent.push_back(!send(slot, pid, *t, i, g))) barrier_failed("signal", ENOMEM);

    wait_for_acknowledgements(slot, pid, *t, n, g);
    slot.generation.store(g + 1, std::memory_order_release);
    return slot.someone_exited;
  }

  // tgkill to target i; false when it must be sent again. ESRCH notes that a thread exited
  // and acknowledges it once the task directory confirms it is gone; EAGAIN (no room to
  // queue the signal) leaves it to be sent again; anything else means no thread can be
  // signalled, and aborts.
  static bool send(round_slot& slot, pid_t pid, target_table& t, std::size_t i, std::uint64_t g) {
    target& e = t.entries[i];
    const pid_t tid = e.tid.load(std::memory_order_relaxed);
    if (::syscall(SYS_tgkill, pid, tid, barrier_signal_number()) == 0) return true;
    const int err = errno;
    if (err == EAGAIN) return false;
    if (err != ESRCH) barrier_failed("signal", err);
    slot.someone_exited = true;
    if (thread_gone(slot.task_dir, tid)) acknowledge(slot, e, g);
    return true;
  }

  static void wait_for_acknowledgements(round_slot& slot, pid_t pid, target_table& t, std::size_t n, std::uint64_t g) {
    // Handlers normally answer within microseconds; past that, look for targets that need
    // no barrier (exited, or off their CPU) instead of waiting on them, send again what
    // could not be sent, and make sure the signal is still palrt's (see "The signal taken
    // away").
    timespec slice{0, 200'000};
    std::uint32_t last_left = 0;  // pending when last seen to change, and when that was
    std::int64_t last_progress_ns = 0;
    for (;;) {
      std::uint32_t left = slot.pending.load(std::memory_order_acquire);
      if (left == 0) return;
      if (left != last_left) {
        last_left = left;
        last_progress_ns = monotonic_ns();
      }
      // 0 (woken), EAGAIN (pending changed) and EINTR all mean: look again.
      if (futex_wait(slot.pending, left, futex_deadline::after(slice)) != ETIMEDOUT) continue;
      check_disposition(/*foreign_handler_fatal=*/monotonic_ns() - last_progress_ns >= chained_patience_ns);
      for (std::size_t i = 0; i < n; ++i) {
        target& e = t.entries[i];
        // acquire: a target found claimed had its fence (B) done before the claim.
        if (e.armed.load(std::memory_order_acquire) != g) continue;
        if (slot.unsent[i]) slot.unsent[i] = !send(slot, pid, t, i, g);
        if (thread_off_cpu(slot.task_dir, e.tid.load(std::memory_order_relaxed))) acknowledge(slot, e, g);
      }
      if (slice.tv_nsec < 50'000'000) slice.tv_nsec *= 2;
    }
  }
};

}  // namespace

owned_mutex& signal_round_lock() { return state().round_mutex; }

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
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
      handler_owner owner;
      find_owner(handler_address(old), owner);
      if (owner.other_copy) {
        char mine[message_path_size];
        object_holding(reinterpret_cast<const void*>(&on_barrier_signal), mine, sizeof mine, nullptr);
        throw barrier_error(EBUSY, std::generic_category(),
                            std::string("signal barrier: SIGRTMAX-1 is already the barrier signal of another copy of "
                                        "palrt in this process, in ") +
                                owner.path + "; this copy is in " + mine +
                                ": two copies of palrt cannot both use the signal strategy; link every module of "
                                "the process against libpalrt.so");
      }
      throw barrier_error(EBUSY, std::generic_category(),
                          std::string("signal barrier: the host already handles SIGRTMAX-1") +
                              (owner.found ? std::string(" (a handler in ") + owner.path + ")" : std::string()));
    }
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
  // reopens here, and is refused here rather than at its first flush. Slot 0's directory:
  // nested slots open theirs at their first flush.
  round_slot& slot = s.slots[0];
  const pid_t pid = ::getpid();
  if (pid != slot.task_dir_pid) {
    const char* why = "";
    if (int err = open_task_dir(slot, pid, owned_mutex::current_tid(), &why)) {
      if (install) ::sigaction(sig, &old, nullptr);
      throw barrier_error(err, std::generic_category(), std::string("signal barrier: ") + why);
    }
  }
  s.installed = true;
  return std::make_unique<signal_barrier>();
}

}  // namespace palrt::pal::internal

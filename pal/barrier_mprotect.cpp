// SPDX-License-Identifier: MIT
// Strategy 2: the helper-page trick of CoreCLR and folly. Making a dirty, present page
// inaccessible forces the kernel to invalidate its TLB entry on every CPU that may cache
// this process's page tables, and on x86-64 it does so by IPI; the IPI handler is a
// serialising event, so each CPU running one of our threads executes a full barrier.
// On arm64 the invalidation is a broadcast TLBI instruction with no IPI, and AMD CPUs with
// INVLPGB (Linux 6.15+) broadcast too, so there the trick is no barrier at all: the strategy
// refuses to be made there (ENOTSUP), forced or not.
//
// Toggles are serialised by toggle_lock (one toggle at a time: two interleaved ones could
// leave the page writable when the second thread's PROT_NONE ran first, and then the first
// would shoot down nothing, or fault writing a page the other made inaccessible).
//
// A flush from a signal handler that interrupted a toggle on its own thread (toggle_lock held
// by that thread, found through owned_mutex::held_by) is served without the lock, as a toggle
// of its own nested in the interrupted one. Why that is sound:
// - Nothing else runs on the page meanwhile: other threads wait for the lock, and the
//   interrupted toggle resumes only when the handler returns, so the nested toggle has the
//   page to itself, like a toggle under the lock. (Nested toggles nest strictly, however
//   deep: a handler's handler is served the same way.)
// - The nested toggle is a whole barrier: it makes the page writable, writes it (present and
//   dirty) and makes it inaccessible, and that last mprotect's shootdown IPIs every CPU
//   running a thread of the process within the nested call.
// - The interrupted toggle still works when it resumes. It must find the page writable if it
//   is yet to write it: `writer_pending` says so (set before its PROT_READ|PROT_WRITE, cleared
//   once it has written), and the nested toggle then makes the page writable again before it
//   returns. Anywhere else the interrupted toggle makes the page writable itself (not yet
//   started) or only has PROT_NONE left to do, which may then change nothing and shoot down
//   nothing; but the nested toggle's shootdown lies between the interrupted call's start and
//   its return, and a barrier there is all that call promises.
// `writer_pending` is read and written only by the lock's holder and handlers on its thread,
// which see each other's accesses in program order; signal fences keep the compiler from
// moving them across the mprotect calls and the write.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>

#include "palrt/pal/internal/barrier_strategies.hpp"

namespace palrt::pal::internal {
namespace {

// Set only by tests (process_barrier_access::set_mprotect_check), read when a barrier is made.
std::atomic<process_barrier_access::mprotect_check> check_override{nullptr};

bool cpu_flushes_tlb_by_broadcast() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" invlpgb") != std::string::npos;  // first CPU speaks for all
  }
  return false;
}

class mprotect_barrier final : public barrier_instance {
 public:
  mprotect_barrier(void* page, std::size_t size) : page_(page), size_(size) {}
  ~mprotect_barrier() override { ::munmap(page_, size_); }

  barrier_strategy strategy() const noexcept override { return barrier_strategy::mprotect; }

  void flush() noexcept override {
    if (int err = toggle(/*flushing=*/true)) barrier_failed("mprotect", err);
  }

  // 0, or the errno of the mprotect that failed. `flushing`: a flush, not the probe that
  // proves mprotect works (only flushes run the test hook).
  int toggle(bool flushing) noexcept {
    const pid_t self = owned_mutex::current_tid();
    // A handler that interrupted this thread's own toggle: served nested (see the top).
    if (toggle_lock.held_by(self)) return toggle_held(flushing);
    toggle_lock.lock(self);
    const int err = toggle_held(flushing);
    toggle_lock.unlock();
    return err;
  }

  // One lock for every instance (the process's, and the diagnostics' own): it is held across
  // fork() (process_barrier.cpp registers it), so that a child never inherits it held by a
  // flushing thread it does not have. Instances other than the process's exist only in tools
  // and tests, where serialising their toggles with the process's costs nothing that matters.
  // Constant-initialised and never destroyed: any thread may flush during exit.
  static constinit inline owned_mutex toggle_lock;

 private:
  // With toggle_lock held by this thread: by this call, or by the toggle it interrupted.
  int toggle_held(bool flushing) noexcept {
    // relaxed, with signal fences: only this thread and its handlers touch it (see the top).
    const bool interrupted_writer = writer_pending_.load(std::memory_order_relaxed);
    writer_pending_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (::mprotect(page_, size_, PROT_READ | PROT_WRITE) != 0) return errno;
    if (flushing) run_flush_hook();
    // The write makes the page present and dirty so the next mprotect has a TLB entry to
    // invalidate (an untouched page may need no shootdown). Atomic so the compiler keeps it.
    reinterpret_cast<std::atomic<long>*>(page_)->fetch_add(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    writer_pending_.store(interrupted_writer, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (::mprotect(page_, size_, PROT_NONE) != 0) return errno;
    // The toggle this one interrupted has its write still to do.
    if (interrupted_writer && ::mprotect(page_, size_, PROT_READ | PROT_WRITE) != 0) return errno;
    return 0;
  }

  void* page_;
  std::size_t size_;
  std::atomic<bool> writer_pending_{false};  // a toggle of this page is yet to write it
};

const char* machine_unsuitable() noexcept {
#if defined(__x86_64__)
  try {
    if (cpu_flushes_tlb_by_broadcast()) return "mprotect barrier: CPU invalidates TLBs by broadcast (INVLPGB), no IPI";
  } catch (...) {  // reading /proc/cpuinfo ran out of memory: no proof the trick works here
    return "mprotect barrier: could not read /proc/cpuinfo";
  }
  return nullptr;
#else
  return "mprotect barrier relies on x86-64 TLB shootdown IPIs";
#endif
}

}  // namespace

const char* mprotect_barrier_unsuitable() noexcept {
  if (auto check = check_override.load()) return check();
  return machine_unsuitable();
}

void process_barrier_access::set_mprotect_check(mprotect_check check) noexcept { check_override.store(check); }

std::unique_ptr<barrier_instance> make_mprotect_barrier() {
  if (const char* why = mprotect_barrier_unsuitable()) throw barrier_error(ENOTSUP, std::generic_category(), why);
  auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* page = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw barrier_error(errno, std::generic_category(), "mprotect barrier: mmap helper page");
  // Locked, the page can never be swapped out between toggles (a non-present page needs no
  // shootdown). Containers often deny mlock (EPERM) or cap it (ENOMEM); the page is then
  // used unlocked, as CoreCLR does: the write in flush() makes it present again.
  (void)::mlock(page, size);
  auto barrier = std::make_unique<mprotect_barrier>(page, size);
  // Prove that mprotect works here (a seccomp filter may deny it) before anyone relies on it.
  if (int err = barrier->toggle(/*flushing=*/false))
    throw barrier_error(err, std::generic_category(), "mprotect barrier: mprotect helper page");
  return barrier;
}

owned_mutex& mprotect_toggle_lock() noexcept { return mprotect_barrier::toggle_lock; }

std::unique_lock<owned_mutex> process_barrier_access::hold_flush_lock(barrier_instance& barrier) {
  if (!dynamic_cast<mprotect_barrier*>(&barrier))
    throw std::invalid_argument("hold_flush_lock: not an mprotect barrier");
  return std::unique_lock(mprotect_barrier::toggle_lock);
}

}  // namespace palrt::pal::internal

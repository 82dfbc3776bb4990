// SPDX-License-Identifier: MIT
// Strategy 2: the helper-page trick of CoreCLR and folly. Making a dirty, present page
// inaccessible forces the kernel to invalidate its TLB entry on every CPU that may cache
// this process's page tables, and on x86-64 it does so by IPI; the IPI handler is a
// serialising event, so each CPU running one of our threads executes a full barrier.
// On arm64 the invalidation is a broadcast TLBI instruction with no IPI, and AMD CPUs with
// INVLPGB (Linux 6.15+) broadcast too, so there the trick is no barrier at all: the strategy
// refuses to be made there (ENOTSUP), forced or not.
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
    // One toggle at a time: two interleaved toggles could leave the page writable when the
    // second thread's PROT_NONE ran first, and then the first would shoot down nothing.
    std::lock_guard lock(toggle_lock);
    if (::mprotect(page_, size_, PROT_READ | PROT_WRITE) != 0) return errno;
    if (flushing) run_flush_hook();
    // The write makes the page present and dirty so the next mprotect has a TLB entry to
    // invalidate (an untouched page may need no shootdown). Atomic so the compiler keeps it.
    reinterpret_cast<std::atomic<long>*>(page_)->fetch_add(1, std::memory_order_relaxed);
    if (::mprotect(page_, size_, PROT_NONE) != 0) return errno;
    return 0;
  }

  // One lock for every instance (the process's, and the diagnostics' own): it is held across
  // fork() (process_barrier.cpp registers it), so that a child never inherits it held by a
  // flushing thread it does not have. Instances other than the process's exist only in tools
  // and tests, where serialising their toggles with the process's costs nothing that matters.
  // Constant-initialised and never destroyed: any thread may flush during exit.
  static constinit inline std::mutex toggle_lock;

 private:
  void* page_;
  std::size_t size_;
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
  if (page == MAP_FAILED)
    throw barrier_error(errno, std::generic_category(), "mprotect barrier: mmap helper page");
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

std::mutex& mprotect_toggle_lock() noexcept { return mprotect_barrier::toggle_lock; }

std::unique_lock<std::mutex> process_barrier_access::hold_flush_lock(barrier_instance& barrier) {
  if (!dynamic_cast<mprotect_barrier*>(&barrier)) throw std::invalid_argument("hold_flush_lock: not an mprotect barrier");
  return std::unique_lock(mprotect_barrier::toggle_lock);
}

}  // namespace palrt::pal::internal

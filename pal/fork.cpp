// SPDX-License-Identifier: MIT
// palrt's pthread_atfork() handlers and what they serve (palrt/pal/fork.hpp states the
// contract, internal/fork_generation.hpp the mechanism).
//
// Why fork() takes the registered locks rather than the child re-initialising them: what a
// lock guards may be half updated by a holder that does not exist in the child, and only
// waiting for the holder to finish makes it whole. Why this cannot deadlock: the forking
// thread takes them in rank order (a lock taken under another ranks after it), each is held
// briefly by a thread that calls no host code and takes no lower-ranked lock under it, and
// none is taken by the forking thread itself around its fork() call (palrt never forks).
// Registration takes the registry's lock too, and is done with no registered lock held, so
// a lock registered while a fork() prepares waits for that fork() instead of being missed.
#include "palrt/pal/fork.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "palrt/pal/internal/fork_generation.hpp"

namespace palrt::pal {

forked_child_error::forked_child_error(const std::string& operation)
    : std::logic_error("palrt: " + operation +
                       ": used in a child after fork(); the object belongs to the parent process, whose "
                       "threads do not exist here (make a new one in the child, or bootstrap() a runtime of "
                       "the child's own; see palrt/pal/fork.hpp)") {}

namespace internal {

std::atomic<std::uint64_t> fork_generation_counter{0};

namespace {

struct held_lock {
  std::mutex* lock;
  fork_lock_rank rank;
  held_lock* next;
};

// Guards the list and the test hook; taken by prepare before any registered lock and released
// after them. Never destroyed (constant-initialised, trivially destructible): a process may
// fork during exit.
constinit std::mutex registry_lock;
constinit held_lock* registered = nullptr;  // newest first, never shrinks
using contended_fn = void (*)(void*);
constinit contended_fn contended_hook = nullptr;
constinit void* contended_context = nullptr;

void take(std::mutex& m) noexcept {
  if (m.try_lock()) return;
  if (contended_hook) contended_hook(contended_context);
  m.lock();
}

void prepare() noexcept {
  registry_lock.lock();
  for (fork_lock_rank rank : {fork_lock_rank::barrier_setup, fork_lock_rank::barrier_flush,
                              fork_lock_rank::side_table, fork_lock_rank::leaf})
    for (held_lock* h = registered; h; h = h->next)
      if (h->rank == rank) take(*h->lock);
}

void release_all() noexcept {
  for (held_lock* h = registered; h; h = h->next) h->lock->unlock();
  registry_lock.unlock();
}

void in_parent() noexcept { release_all(); }

void in_child() noexcept {
  // The child's one thread took every lock in prepare (as the parent's forking thread), so it
  // may release them: std::mutex is a normal mutex, which does not check its owner.
  release_all();
  // relaxed: see fork_generation_counter (no other thread exists yet).
  fork_generation_counter.store(fork_generation_counter.load(std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
}

}  // namespace

void install_fork_handlers() {
  static const bool installed = [] {
    if (int err = ::pthread_atfork(&prepare, &in_parent, &in_child)) {
      std::fprintf(stderr, "palrt: pthread_atfork: %s; palrt cannot tell a fork()ed child from its parent\n",
                   std::strerror(err));
      std::abort();
    }
    return true;
  }();
  (void)installed;
}

fork_stamp::fork_stamp() noexcept {
  install_fork_handlers();
  // relaxed: see fork_generation_counter.
  generation_ = fork_generation_counter.load(std::memory_order_relaxed);
}

void hold_across_fork(std::mutex& m, fork_lock_rank rank) {
  install_fork_handlers();
  auto* entry = new held_lock{&m, rank, nullptr};  // never freed: prepare walks the list
  std::lock_guard guard(registry_lock);
  entry->next = registered;
  registered = entry;
}

void fork_access::on_contended_prepare(void (*hook)(void* context), void* context) noexcept {
  std::lock_guard guard(registry_lock);
  contended_hook = hook;
  contended_context = context;
}

}  // namespace internal
}  // namespace palrt::pal

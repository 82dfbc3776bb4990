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
#include "palrt/pal/internal/owned_mutex.hpp"

namespace palrt::pal {

forked_child_error::forked_child_error(const std::string& operation)
    : std::logic_error("palrt: " + operation +
                       ": used in a child after fork(); the object belongs to the parent process, whose "
                       "threads do not exist here (make a new one in the child, or bootstrap() a runtime of "
                       "the child's own; see palrt/pal/fork.hpp)") {}

namespace internal {

std::atomic<std::uint64_t> fork_generation_counter{0};

namespace {

// One of the two is set.
struct held_lock {
  std::mutex* lock;
  owned_mutex* owned;
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

template <class Mutex>
void take_lock(Mutex& m) noexcept {
  if (m.try_lock()) return;
  if (contended_hook) contended_hook(contended_context);
  m.lock();
}

void take(const held_lock& h) noexcept {
  if (h.owned)
    take_lock(*h.owned);
  else
    take_lock(*h.lock);
}

void prepare() noexcept {
  registry_lock.lock();
  for (fork_lock_rank rank :
       {fork_lock_rank::barrier_setup, fork_lock_rank::barrier_flush, fork_lock_rank::side_table, fork_lock_rank::leaf})
    for (held_lock* h = registered; h; h = h->next)
      if (h->rank == rank) take(*h);
}

void release_all() noexcept {
  for (held_lock* h = registered; h; h = h->next) h->owned ? h->owned->unlock() : h->lock->unlock();
  registry_lock.unlock();
}

void in_parent() noexcept { release_all(); }

void in_child() noexcept {
  // The child's one thread took every lock in prepare (as the parent's forking thread), so it
  // may release them: std::mutex is a normal mutex and owned_mutex::unlock() does not check
  // its owner either (the child's thread id is not the one the parent's thread took it under).
  release_all();
  // relaxed: see fork_generation_counter (no other thread exists yet).
  fork_generation_counter.store(fork_generation_counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
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

namespace {
void add(held_lock* entry) {
  std::lock_guard guard(registry_lock);
  entry->next = registered;
  registered = entry;
}
}  // namespace

void hold_across_fork(std::mutex& m, fork_lock_rank rank) {
  install_fork_handlers();
  add(new held_lock{&m, nullptr, rank, nullptr});  // never freed: prepare walks the list
}

void hold_across_fork(owned_mutex& m, fork_lock_rank rank) {
  install_fork_handlers();
  add(new held_lock{nullptr, &m, rank, nullptr});  // never freed, as above
}

void fork_access::on_contended_prepare(void (*hook)(void* context), void* context) noexcept {
  std::lock_guard guard(registry_lock);
  contended_hook = hook;
  contended_context = context;
}

}  // namespace internal
}  // namespace palrt::pal

// SPDX-License-Identifier: MIT
// Thread records, thread handles and APCs (thread_handle.hpp, internal/thread_record.hpp).
#include "palrt/sync/internal/thread_record.hpp"

#include <pthread.h>
#include <unistd.h>

#include <memory>
#include <new>
#include <string>
#include <system_error>

#include "palrt/sync/internal/mutex_object.hpp"
#include "palrt/sync/internal/waits_access.hpp"
#include "palrt/sync/thread_handle.hpp"

namespace palrt::sync {
namespace internal {
namespace {

// Where the calling thread's record lives, and why not in a thread_local that owns it.
//
// A host's thread_local constructed before the thread's first wait (or, on the main thread, a
// global object) is destroyed after palrt's per-thread state, in reverse order of
// construction, and its destructor may wait, acquire a mutex, or release one it owns: hosts
// do this all the time. So, as the read sections do (reader_epoch.cpp), the thread finds its
// record through a constinit plain pointer, which has no destructor and stays readable for
// the whole of the thread's exit. The record is owned through a pthread key whose destructor
// is its exit hook: glibc runs the key destructors after every thread_local destructor
// (__call_tls_dtors, then __nptl_deallocate_tsd), so the record is alive for all of them, and
// the thread exits (abandons its mutexes, signals its handle) only once they are done; a
// thread_local exit hook would instead abandon a mutex that a later destructor still
// releases. Should another key's destructor wait after ours ran, the thread gets a fresh
// record and sets the key again, and glibc calls our destructor once more for it.
//
// The main thread runs no key destructors: exit() ends the process, not the thread (as
// ExitProcess does), so its record stays valid through the global destructors and is never
// exited.
struct record_owner {
  explicit record_owner(std::shared_ptr<thread_record> r) noexcept : record(std::move(r)) {}
  std::shared_ptr<thread_record> record;
};

constinit thread_local record_owner* current_owner = nullptr;  // null before the first wait

void exit_thread_record(void* owned) noexcept {
  const std::unique_ptr<record_owner> owner(static_cast<record_owner*>(owned));
  current_owner = nullptr;  // a wait from here on (a later key destructor) makes a new record
  owner->record->exit();
}

pthread_key_t record_key() {
  // A function-local static: a wait from any static initialiser or destructor finds it made.
  static const pthread_key_t key = [] {
    // palrt's fork handlers first: a child handler registered after them runs after them, so
    // refresh_forking_thread() reads the child's generation.
    pal::internal::install_fork_handlers();
    if (const int err = ::pthread_atfork(nullptr, nullptr, &refresh_forking_thread)) {
      throw sync_error(static_cast<std::errc>(err), "palrt waits: pthread_atfork for the thread records failed: " +
                                                        std::generic_category().message(err));
    }
    pthread_key_t k;
    if (const int err = ::pthread_key_create(&k, exit_thread_record)) {
      throw sync_error(static_cast<std::errc>(err), "palrt waits: pthread_key_create for the thread records failed: " +
                                                        std::generic_category().message(err));
    }
    return k;
  }();
  return key;
}

// Out of line: once per thread.
record_owner& make_current_owner() {
  const pthread_key_t key = record_key();
  auto owner = std::make_unique<record_owner>(std::make_shared<thread_record>(::gettid()));
  // ENOMEM is its only error for a valid key (glibc allocates the keys past the first 32).
  if (::pthread_setspecific(key, owner.get()) != 0) throw std::bad_alloc();
  current_owner = owner.release();  // the key owns it now
  return *current_owner;
}

record_owner& current_record_owner() {
  if (record_owner* owner = current_owner) return *owner;
  return make_current_owner();
}

}  // namespace

// The child's only thread is the one that forked: it exists in the new generation.
void refresh_forking_thread() noexcept {
  if (record_owner* owner = current_owner) owner->record->alive_in_ = pal::internal::fork_stamp();
}

thread_record::~thread_record() = default;

void thread_record::exit() noexcept {
  std::deque<std::function<void()>> dropped;
  {
    wake_list wakes;  // declared first: wakes after the lock is released
    std::lock_guard lock(objects_lock());
    exited_ = true;
    while (owned_mutexes_) owned_mutexes_->abandon(wakes);  // unlinks it from the list
    satisfy_waiters(wakes);
    dropped.swap(apcs_);
  }
  // `dropped` goes here, outside the lock: an APC's captures may do anything when destroyed.
}

std::shared_ptr<thread_record> current_thread_record_shared() { return current_record_owner().record; }

thread_record& current_thread_record() { return *current_record_owner().record; }

void run_queued_apcs(thread_record& self) {
  for (;;) {
    std::function<void()> apc;
    {
      std::lock_guard lock(objects_lock());
      if (self.apcs_.empty()) return;
      apc = std::move(self.apcs_.front());
      self.apcs_.pop_front();
    }
    apc();
  }
}

}  // namespace internal

thread_handle thread_handle::current() { return thread_handle(internal::current_thread_record_shared()); }

pid_t thread_handle::tid() const {
  return static_cast<internal::thread_record&>(object_for("thread_handle::tid")).tid();
}

bool thread_handle::has_exited() const {
  auto& record = static_cast<internal::thread_record&>(object_for("thread_handle::has_exited"));
  std::lock_guard lock(internal::objects_lock());
  return record.gone();
}

void queue_apc(const thread_handle& thread, std::function<void()> fn) {
  auto& record = static_cast<internal::thread_record&>(thread.object_for("queue_apc"));
  if (!fn) throw sync_error(std::errc::invalid_argument, "queue_apc: the function is empty");
  internal::wake_list wakes;
  std::lock_guard lock(internal::objects_lock());
  if (record.gone()) {
    throw sync_error(std::errc::no_such_process,
                     "queue_apc: thread " + std::to_string(record.tid()) +
                         (record.exited_ ? " has exited" : " is the parent's, not in this fork()ed child") +
                         "; the APC was not queued");
  }
  record.apcs_.push_back(std::move(fn));
  if (record.current_wait_ && record.current_wait_->alertable)
    internal::complete(*record.current_wait_, internal::waiter_state::alerted, wakes);
}

}  // namespace palrt::sync

// Thread records, thread handles and APCs (thread_handle.hpp, internal/thread_record.hpp).
#include "palrt/sync/internal/thread_record.hpp"

#include <unistd.h>

#include <string>

#include "palrt/sync/internal/mutex_object.hpp"
#include "palrt/sync/internal/waits_access.hpp"
#include "palrt/sync/thread_handle.hpp"

namespace palrt::sync {
namespace internal {
namespace {

// Owns the calling thread's record; its destructor is the thread's exit as the waits see it.
struct record_holder {
  std::shared_ptr<thread_record> record;
  ~record_holder() {
    if (record) record->exit();
  }
};

thread_local record_holder current_record;

}  // namespace

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

std::shared_ptr<thread_record> current_thread_record_shared() {
  if (!current_record.record) current_record.record = std::make_shared<thread_record>(::gettid());
  return current_record.record;
}

thread_record& current_thread_record() {
  if (!current_record.record) current_record.record = std::make_shared<thread_record>(::gettid());
  return *current_record.record;
}

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
  return record.exited_;
}

void queue_apc(const thread_handle& thread, std::function<void()> fn) {
  auto& record = static_cast<internal::thread_record&>(thread.object_for("queue_apc"));
  if (!fn) throw sync_error(std::errc::invalid_argument, "queue_apc: the function is empty");
  internal::wake_list wakes;
  std::lock_guard lock(internal::objects_lock());
  if (record.exited_) {
    throw sync_error(std::errc::no_such_process,
                     "queue_apc: thread " + std::to_string(record.tid()) + " has exited; the APC was not queued");
  }
  record.apcs_.push_back(std::move(fn));
  if (record.current_wait_ && record.current_wait_->alertable)
    internal::complete(*record.current_wait_, internal::waiter_state::alerted, wakes);
}

}  // namespace palrt::sync

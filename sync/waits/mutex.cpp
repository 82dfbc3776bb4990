// SPDX-License-Identifier: MIT
#include "palrt/sync/mutex.hpp"

#include <string>

#include "palrt/sync/internal/mutex_object.hpp"
#include "palrt/sync/internal/thread_record.hpp"

namespace palrt::sync {
namespace internal {

mutex_object::~mutex_object() {
  // The last handle went while a thread still owned the mutex: leave that thread's list.
  std::lock_guard lock(objects_lock());
  if (!owner_) return;
  if (prev_owned_) {
    prev_owned_->next_owned_ = next_owned_;
  } else {
    owner_->owned_mutexes_ = next_owned_;
  }
  if (next_owned_) next_owned_->prev_owned_ = prev_owned_;
}

bool mutex_object::signalled_for(const thread_record& t) const noexcept {
  // An owner that is gone without exiting is a parent's thread in a fork()ed child: its
  // mutexes are abandoned there (thread_record.hpp).
  return owner_ == nullptr || owner_ == &t || owner_->gone();
}

bool mutex_object::acquire(thread_record& t) noexcept {
  if (owner_ && owner_ != &t && owner_->gone()) {
    // Abandoned, as if its owner had exited, and `t` takes it now: freed without satisfying
    // anyone (another waiter given it here would be given what `t` is taking; and this may
    // run inside satisfy_waiters, for `t`'s own wait).
    unlink_from_owner();
    abandoned_ = true;
  }
  if (!owner_) {
    owner_ = &t;
    prev_owned_ = nullptr;
    next_owned_ = t.owned_mutexes_;
    if (next_owned_) next_owned_->prev_owned_ = this;
    t.owned_mutexes_ = this;
  }
  ++recursion_;
  const bool was_abandoned = abandoned_;
  abandoned_ = false;
  return was_abandoned;
}

bool mutex_object::release(thread_record& t, wake_list& wakes) noexcept {
  if (owner_ != &t) return false;
  if (--recursion_ == 0) free_and_satisfy(false, wakes);
  return true;
}

void mutex_object::abandon(wake_list& wakes) noexcept { free_and_satisfy(true, wakes); }

void mutex_object::unlink_from_owner() noexcept {
  if (prev_owned_) {
    prev_owned_->next_owned_ = next_owned_;
  } else {
    owner_->owned_mutexes_ = next_owned_;
  }
  if (next_owned_) next_owned_->prev_owned_ = prev_owned_;
  prev_owned_ = next_owned_ = nullptr;
  owner_ = nullptr;
  recursion_ = 0;
}

void mutex_object::free_and_satisfy(bool abandoned, wake_list& wakes) noexcept {
  unlink_from_owner();
  abandoned_ = abandoned;
  satisfy_waiters(wakes);
}

}  // namespace internal

mutex_handle::mutex_handle(mutex_owner initial_owner) : handle(std::make_shared<internal::mutex_object>()) {
  if (initial_owner == mutex_owner::nobody) return;
  internal::thread_record& self = internal::current_thread_record();
  std::lock_guard lock(internal::objects_lock());
  static_cast<internal::mutex_object&>(object_for("mutex_handle")).acquire(self);
}

void mutex_handle::release() {
  auto& m = static_cast<internal::mutex_object&>(object_for("mutex_handle::release"));
  internal::thread_record& self = internal::current_thread_record();
  internal::wake_list wakes;
  std::lock_guard lock(internal::objects_lock());
  if (!m.release(self, wakes)) {
    const internal::thread_record* owner = m.owner();
    throw sync_error(std::errc::operation_not_permitted,
                     "mutex_handle::release: thread " + std::to_string(self.tid()) + " does not own the mutex (" +
                         (owner ? "thread " + std::to_string(owner->tid()) + " does" : std::string("it is free")) +
                         "); nothing was released");
  }
}

}  // namespace palrt::sync

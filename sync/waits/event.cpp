// SPDX-License-Identifier: MIT
#include "palrt/sync/event.hpp"

#include "palrt/sync/internal/waitable_object.hpp"

namespace palrt::sync {
namespace {

class event_object final : public internal::waitable_object {
 public:
  event_object(event_reset reset, bool signalled) noexcept
      : manual_(reset == event_reset::manual), signalled_(signalled) {}

  bool signalled_for(const internal::thread_record&) const noexcept override { return signalled_; }
  bool acquire(internal::thread_record&) noexcept override {
    if (!manual_) signalled_ = false;  // an auto-reset event releases one waiter per set()
    return false;
  }

  void set(internal::wake_list& wakes) noexcept {
    signalled_ = true;
    satisfy_waiters(wakes);
  }
  void reset() noexcept { signalled_ = false; }

 private:
  const bool manual_;
  bool signalled_;  // guarded by objects_lock()
};

}  // namespace

event_handle::event_handle(event_reset reset, bool initially_signalled)
    : handle(std::make_shared<event_object>(reset, initially_signalled)) {}

void event_handle::set() {
  auto& e = static_cast<event_object&>(object_for("event_handle::set"));
  internal::wake_list wakes;
  std::lock_guard lock(internal::objects_lock());
  e.set(wakes);
}

void event_handle::reset() {
  auto& e = static_cast<event_object&>(object_for("event_handle::reset"));
  std::lock_guard lock(internal::objects_lock());
  e.reset();
}

}  // namespace palrt::sync

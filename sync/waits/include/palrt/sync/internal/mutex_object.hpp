// SPDX-License-Identifier: MIT
// The mutex object behind mutex_handle (mutex.hpp). Its state is guarded by objects_lock().
#pragma once

#include <cstdint>

#include "palrt/sync/internal/waitable_object.hpp"

namespace palrt::sync::internal {

class mutex_object final : public waitable_object {
 public:
  ~mutex_object() override;

  bool signalled_for(const thread_record& t) const noexcept override;
  bool acquire(thread_record& t) noexcept override;

  // Under objects_lock(): one release by `t`; false if `t` does not own the mutex.
  bool release(thread_record& t, wake_list& wakes) noexcept;
  // Under objects_lock(), by the exiting owner: frees the mutex and marks it abandoned.
  void abandon(wake_list& wakes) noexcept;

  thread_record* owner() const noexcept { return owner_; }
  mutex_object* next_owned_ = nullptr;  // the owner's list of mutexes (thread_record)
  mutex_object* prev_owned_ = nullptr;

 private:
  void unlink_from_owner() noexcept;  // the mutex is free afterwards
  void free_and_satisfy(bool abandoned, wake_list& wakes) noexcept;
  thread_record* owner_ = nullptr;
  std::uint32_t recursion_ = 0;
  bool abandoned_ = false;  // the next acquirer learns of it
};

}  // namespace palrt::sync::internal

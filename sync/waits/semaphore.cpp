// SPDX-License-Identifier: MIT
#include "palrt/sync/semaphore.hpp"

#include <string>

#include "palrt/sync/internal/waitable_object.hpp"

namespace palrt::sync {
namespace {

class semaphore_object final : public internal::waitable_object {
 public:
  semaphore_object(std::int32_t initial, std::int32_t maximum) noexcept : count_(initial), maximum_(maximum) {}

  bool signalled_for(const internal::thread_record&) const noexcept override { return count_ > 0; }
  bool acquire(internal::thread_record&) noexcept override {
    --count_;
    return false;
  }

  std::int32_t maximum() const noexcept { return maximum_; }
  std::int32_t count_;  // guarded by objects_lock()

 private:
  const std::int32_t maximum_;
};

}  // namespace

semaphore_handle::semaphore_handle(std::int32_t initial, std::int32_t maximum)
    : handle([&] {
        if (maximum < 1 || initial < 0 || initial > maximum) {
          throw sync_error(std::errc::invalid_argument, "semaphore: initial count " + std::to_string(initial) +
                                                            " and maximum " + std::to_string(maximum) +
                                                            " need 0 <= initial <= maximum and maximum >= 1");
        }
        return std::make_shared<semaphore_object>(initial, maximum);
      }()) {}

std::int32_t semaphore_handle::release(std::int32_t count) {
  auto& s = static_cast<semaphore_object&>(object_for("semaphore_handle::release"));
  if (count < 1) {
    throw sync_error(std::errc::invalid_argument,
                     "semaphore_handle::release: count " + std::to_string(count) + " is below 1");
  }
  internal::wake_list wakes;
  std::lock_guard lock(internal::objects_lock());
  const std::int32_t before = s.count_;
  if (count > s.maximum() - before) {
    throw sync_error(std::errc::value_too_large, "semaphore_handle::release: count " + std::to_string(before) + " + " +
                                                     std::to_string(count) + " would pass the maximum " +
                                                     std::to_string(s.maximum()) + "; nothing was released");
  }
  s.count_ += count;
  s.satisfy_waiters(wakes);
  return before;
}

}  // namespace palrt::sync

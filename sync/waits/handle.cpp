// SPDX-License-Identifier: MIT
#include "palrt/sync/handle.hpp"

#include "palrt/sync/internal/waitable_object.hpp"
#include "palrt/sync/internal/waits_access.hpp"

namespace palrt::sync {

sync_error::sync_error(std::errc code, const std::string& what) : std::system_error(std::make_error_code(code), what) {}

handle::handle(std::shared_ptr<internal::waitable_object> object) noexcept : object_(std::move(object)) {}
handle::handle(handle&& other) noexcept : object_(std::move(other.object_)) {}
handle& handle::operator=(handle&& other) noexcept {
  object_ = std::move(other.object_);
  return *this;
}
handle::~handle() = default;

void handle::close() noexcept { object_.reset(); }

bool handle::same_object(const handle& other) const noexcept { return object_ != nullptr && object_ == other.object_; }

internal::waitable_object& handle::object_for(const char* operation) const {
  if (!object_) throw sync_error(std::errc::bad_file_descriptor, std::string(operation) + ": the handle is closed");
  return *object_;
}

namespace internal {

std::size_t waits_access::waiter_count(const handle& h) {
  if (!h.object_) return 0;
  std::lock_guard lock(objects_lock());
  return h.object_->waiter_count();
}

}  // namespace internal

}  // namespace palrt::sync

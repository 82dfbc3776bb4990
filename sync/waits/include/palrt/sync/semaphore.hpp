// SPDX-License-Identifier: MIT
// Semaphores with a maximum count, as Win32 has them.
//
// The count is between 0 and the maximum; the semaphore is signalled while the count is
// above 0, and each satisfied wait takes one. release(n) adds n, and fails rather than go
// past the maximum: a release past it is a bug in the caller's accounting (Win32's
// ERROR_TOO_MANY_POSTS), reported instead of silently clamped.
//
// Thread-safe: any thread may release and wait at the same time.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstdint>

#include "palrt/sync/handle.hpp"

namespace palrt::sync {

class semaphore_handle : public handle {
 public:
  semaphore_handle() noexcept = default;  // closed
  // A new semaphore. Throws sync_error(EINVAL) unless 0 <= initial <= maximum and
  // maximum >= 1; std::bad_alloc.
  semaphore_handle(std::int32_t initial, std::int32_t maximum);

  // Adds `count` (>= 1) and returns the count before. Throws sync_error(EOVERFLOW) if that
  // would pass the maximum, EINVAL for count < 1, EBADF on a closed handle; the count is
  // then unchanged.
  std::int32_t release(std::int32_t count = 1);
};

}  // namespace palrt::sync

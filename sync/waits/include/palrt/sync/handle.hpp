// SPDX-License-Identifier: MIT
// Handles to palrt's waitable objects, and the one error type of the objects and waits.
//
// A handle is how a host holds an event, a semaphore, a mutex, a thread or a process, in the
// manner of a Win32 HANDLE: the object lives as long as any handle to it (a copy of a handle
// is a duplicate, as with DuplicateHandle), close() drops this one. Every operation on a
// closed handle (closed explicitly, moved from, or default-constructed) throws sync_error
// with EBADF and changes nothing.
//
// Handles are values: copy them into a std::vector<handle> to wait on objects of different
// kinds at once (wait.hpp). A handle object itself is not synchronised (like std::shared_ptr:
// two threads may use two copies of a handle freely, but not close() one copy while another
// thread uses that same copy); the object behind it is.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

namespace palrt::sync {

namespace internal {
class waitable_object;
class waits_access;
}  // namespace internal

// What the objects and waits throw for bad input or a request the object's state forbids.
// code() is an errno value that names the kind of problem; what() names the operation and the
// argument. The operation that threw changed nothing.
//   EBADF      a closed handle
//   E2BIG      more than max_wait_handles handles
//   EINVAL     no handles, duplicate handles in a wait-all, a negative timeout, a bad count
//   EOVERFLOW  a semaphore released past its maximum
//   EPERM      a mutex released by a thread that does not own it
//   ESRCH      an APC queued to a thread that has exited; a process that no longer exists
//   ECHILD     a process's exit status, when it is unavailable (not a child of this process)
//   EBUSY      a process's exit status, while it still runs
class sync_error : public std::system_error {
 public:
  sync_error(std::errc code, const std::string& what);
};

// A timeout that never expires.
inline constexpr std::chrono::nanoseconds infinite = std::chrono::nanoseconds::max();
// The most handles one wait takes (Win32's MAXIMUM_WAIT_OBJECTS).
inline constexpr std::size_t max_wait_handles = 64;

class handle {
 public:
  handle() noexcept = default;  // closed
  handle(const handle&) noexcept = default;
  handle& operator=(const handle&) noexcept = default;
  // The moved-from handle is closed.
  handle(handle&& other) noexcept;
  handle& operator=(handle&& other) noexcept;
  ~handle();

  // Drops this handle; the object goes away with its last handle (a thread or process keeps
  // running: only palrt's record of it goes). Closing a closed handle does nothing.
  void close() noexcept;
  bool is_open() const noexcept { return object_ != nullptr; }
  // Whether both handles refer to the same object (false if either is closed).
  bool same_object(const handle& other) const noexcept;

 protected:
  explicit handle(std::shared_ptr<internal::waitable_object> object) noexcept;
  // The object, or sync_error(EBADF) naming `operation`.
  internal::waitable_object& object_for(const char* operation) const;

 private:
  friend class internal::waits_access;
  std::shared_ptr<internal::waitable_object> object_;
};

}  // namespace palrt::sync

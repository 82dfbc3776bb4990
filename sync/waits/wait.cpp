// SPDX-License-Identifier: MIT
// wait_one / wait_any / wait_all and sleep_for: the waiting half of the protocol in
// internal/waitable_object.hpp.
#include "palrt/sync/wait.hpp"

#include <time.h>

#include <array>
#include <cerrno>
#include <optional>
#include <string>

#include "palrt/pal/internal/futex.hpp"
#include "palrt/sync/internal/waitable_object.hpp"
#include "palrt/sync/internal/thread_record.hpp"
#include "palrt/sync/internal/waits_access.hpp"

namespace palrt::sync {
namespace {

using internal::objects_lock;
using internal::thread_record;
using internal::waiter;
using internal::waiter_state;

// The CLOCK_MONOTONIC instant `timeout` from now; empty for `infinite` (or a timeout so long
// that it would overflow, which is the same thing in practice).
std::optional<timespec> deadline_after(std::chrono::nanoseconds timeout) {
  if (timeout == infinite) return std::nullopt;
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t secs = timeout.count() / 1'000'000'000;
  if (secs > std::int64_t{1} << 40) return std::nullopt;
  std::int64_t nsec = now.tv_nsec + timeout.count() % 1'000'000'000;
  timespec at;
  at.tv_sec = static_cast<time_t>(now.tv_sec + secs + nsec / 1'000'000'000);
  at.tv_nsec = static_cast<long>(nsec % 1'000'000'000);
  return at;
}

void check_timeout(const char* operation, std::chrono::nanoseconds timeout) {
  if (timeout.count() < 0) {
    throw sync_error(std::errc::invalid_argument,
                     std::string(operation) + ": negative timeout (" + std::to_string(timeout.count()) + " ns)");
  }
}

wait_status status_of(waiter_state s) noexcept {
  switch (s) {
    case waiter_state::signalled: return wait_status::signalled;
    case waiter_state::abandoned: return wait_status::abandoned;
    case waiter_state::alerted: return wait_status::alerted;
    default: return wait_status::timed_out;
  }
}

// The wait itself, once the arguments are checked: `w.blocks` name the objects.
wait_result wait_on(waiter& w, std::chrono::nanoseconds timeout) {
  thread_record& self = *w.thread;
  const std::optional<timespec> deadline = deadline_after(timeout);
  {
    std::unique_lock lock(objects_lock());
    if (w.alertable && !self.apcs_.empty()) {
      lock.unlock();
      internal::run_queued_apcs(self);
      return {wait_status::alerted, 0};
    }
    if (w.count > 0 && internal::try_satisfy(w)) return {status_of(w.state), w.index};
    if (timeout.count() == 0) return {wait_status::timed_out, 0};
    // relaxed: the word is only written under the lock, which we hold; the futex wait below
    // compares it in the kernel.
    self.wait_word.store(0, std::memory_order_relaxed);
    for (std::size_t i = 0; i < w.count; ++i) w.blocks[i].target->link(w.blocks[i]);
    self.current_wait_ = &w;
  }
  for (;;) {
    // acquire: pairs with the release store in internal::complete(), so the result it wrote
    // into `w` (and what it acquired for us) is visible.
    if (self.wait_word.load(std::memory_order_acquire) == 1) break;
    const int err = pal::internal::futex_wait(
        self.wait_word, 0, deadline ? std::optional(pal::internal::futex_deadline::at(*deadline)) : std::nullopt);
    if (err != ETIMEDOUT) continue;  // woken, EAGAIN (already completed), EINTR: re-check
    std::lock_guard lock(objects_lock());
    // Under the lock, so relaxed is enough: a completion that raced the timeout wins.
    if (self.wait_word.load(std::memory_order_relaxed) == 1) break;
    for (std::size_t i = 0; i < w.count; ++i) w.blocks[i].target->unlink(w.blocks[i]);
    self.current_wait_ = nullptr;
    w.state = waiter_state::timed_out;
    break;
  }
  if (w.state == waiter_state::alerted) internal::run_queued_apcs(self);
  return {status_of(w.state), w.state == waiter_state::timed_out || w.state == waiter_state::alerted ? 0 : w.index};
}

wait_result wait_many(const char* operation, const handle* const* handles, std::size_t count, bool all,
                      std::chrono::nanoseconds timeout, alertable mode) {
  if (count == 0) throw sync_error(std::errc::invalid_argument, std::string(operation) + ": no handles to wait on");
  if (count > max_wait_handles) {
    throw sync_error(std::errc::argument_list_too_long, std::string(operation) + ": " + std::to_string(count) +
                                                            " handles, at most " + std::to_string(max_wait_handles));
  }
  check_timeout(operation, timeout);
  std::array<internal::wait_block, max_wait_handles> blocks;
  for (std::size_t i = 0; i < count; ++i) {
    if (!handles[i] || !handles[i]->is_open()) {
      throw sync_error(std::errc::bad_file_descriptor,
                       std::string(operation) + ": handle " + std::to_string(i) + " is closed");
    }
    blocks[i].target = internal::waits_access::object_of(*handles[i]).get();
    blocks[i].index = i;
  }
  if (all) {
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t j = i + 1; j < count; ++j) {
        if (blocks[i].target == blocks[j].target) {
          throw sync_error(std::errc::invalid_argument, std::string(operation) + ": handles " + std::to_string(i) +
                                                            " and " + std::to_string(j) + " refer to the same object");
        }
      }
    }
  }
  waiter w;
  w.thread = &internal::current_thread_record();
  w.blocks = blocks.data();
  w.count = count;
  w.all = all;
  w.alertable = mode == alertable::yes;
  for (std::size_t i = 0; i < count; ++i) blocks[i].owner = &w;
  return wait_on(w, timeout);
}

const handle* address_of(const handle& h) noexcept { return &h; }
const handle* address_of(std::reference_wrapper<const handle> h) noexcept { return &h.get(); }

template <class Handles>
wait_result wait_span(const char* operation, Handles objects, bool all, std::chrono::nanoseconds timeout,
                      alertable mode) {
  if (objects.size() > max_wait_handles) return wait_many(operation, nullptr, objects.size(), all, timeout, mode);
  std::array<const handle*, max_wait_handles> pointers;
  for (std::size_t i = 0; i < objects.size(); ++i) pointers[i] = address_of(objects.begin()[i]);
  return wait_many(operation, pointers.data(), objects.size(), all, timeout, mode);
}

}  // namespace

wait_result wait_one(const handle& object, std::chrono::nanoseconds timeout, alertable mode) {
  const handle* one = &object;
  return wait_many("wait_one", &one, 1, false, timeout, mode);
}

wait_result wait_any(std::span<const handle> objects, std::chrono::nanoseconds timeout, alertable mode) {
  return wait_span("wait_any", objects, false, timeout, mode);
}

wait_result wait_all(std::span<const handle> objects, std::chrono::nanoseconds timeout, alertable mode) {
  return wait_span("wait_all", objects, true, timeout, mode);
}

wait_result wait_any(std::initializer_list<std::reference_wrapper<const handle>> objects,
                     std::chrono::nanoseconds timeout, alertable mode) {
  return wait_span("wait_any", objects, false, timeout, mode);
}

wait_result wait_all(std::initializer_list<std::reference_wrapper<const handle>> objects,
                     std::chrono::nanoseconds timeout, alertable mode) {
  return wait_span("wait_all", objects, true, timeout, mode);
}

wait_result wait_any(std::span<const handle* const> objects, std::chrono::nanoseconds timeout, alertable mode) {
  return wait_many("wait_any", objects.data(), objects.size(), false, timeout, mode);
}

wait_result wait_all(std::span<const handle* const> objects, std::chrono::nanoseconds timeout, alertable mode) {
  return wait_many("wait_all", objects.data(), objects.size(), true, timeout, mode);
}

wait_status sleep_for(std::chrono::nanoseconds duration, alertable mode) {
  check_timeout("sleep_for", duration);
  waiter w;
  w.thread = &internal::current_thread_record();
  w.alertable = mode == alertable::yes;
  return wait_on(w, duration).status;
}

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/process_monitor.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "palrt/sync/handle.hpp"
#include "palrt/sync/internal/process_object.hpp"

namespace palrt::sync::internal {
namespace {

[[noreturn]] void throw_errno(const char* what, int error) {
  throw sync_error(static_cast<std::errc>(error),
                   std::string("open_process: ") + what + " failed: " + std::generic_category().message(error));
}

}  // namespace

process_monitor::~process_monitor() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void process_monitor::watch(std::shared_ptr<process_object> process) {
  std::lock_guard lock(mutex_);
  if (epoll_fd_ < 0) {
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) throw_errno("epoll_create1", errno);
    const int ev = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev < 0) {
      const int error = errno;
      ::close(ep);
      throw_errno("eventfd", error);
    }
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = ev;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0) {
      const int error = errno;
      ::close(ep);
      ::close(ev);
      throw_errno("epoll_ctl", error);
    }
    epoll_fd_ = ep;
    event_fd_ = ev;
  }
  const int fd = process->pidfd();
  auto [it, inserted] = by_pidfd_.emplace(fd, std::move(process));
  // A second handle to a child shares the first one's object (process_object.hpp), pidfd
  // included: watched already. (The map holds the object, so its descriptor is not reused.)
  if (!inserted) return;
  epoll_event e{};
  e.events = EPOLLIN;  // a pidfd is readable once its process has exited
  e.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) {
    const int error = errno;
    by_pidfd_.erase(it);
    throw_errno("epoll_ctl", error);
  }
  watched_.store(by_pidfd_.size(), std::memory_order_seq_cst);  // see active()
}

void process_monitor::poke() noexcept {
  // The eventfd is made once and never changes after; a poke before it exists has nobody to
  // wake in epoll (the worker sleeps on its futex then).
  if (!active()) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(event_fd_, &one, sizeof one);  // EAGAIN: already pending
}

void process_monitor::wait_and_handle(std::optional<timespec> timeout) noexcept {
  std::array<epoll_event, 32> events;
  int n;
  do {
    n = ::epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout ? &*timeout : nullptr,
                       nullptr);
  } while (n < 0 && errno == EINTR);
  for (int i = 0; i < n; ++i) {
    const int fd = events[static_cast<std::size_t>(i)].data.fd;
    if (fd == event_fd_) {
      std::uint64_t count;
      [[maybe_unused]] const ssize_t r = ::read(event_fd_, &count, sizeof count);
      continue;
    }
    std::shared_ptr<process_object> exited;
    {
      std::lock_guard lock(mutex_);
      auto it = by_pidfd_.find(fd);
      if (it == by_pidfd_.end()) continue;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      exited = std::move(it->second);
      by_pidfd_.erase(it);
      watched_.store(by_pidfd_.size(), std::memory_order_seq_cst);  // see active()
    }
    exited->reap_and_signal();
  }
}

}  // namespace palrt::sync::internal

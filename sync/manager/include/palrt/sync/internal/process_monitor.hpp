// SPDX-License-Identifier: MIT
// The sync manager's watch over process handles: an epoll set of pidfds (and an eventfd to
// wake the worker), in which the worker sleeps while at least one process is watched.
//
// Any thread registers a process (watch()); only the worker waits and handles exits. The
// epoll and eventfd descriptors are made on the first watch(), so a runtime that never opens
// a process handle has none. A registration holds its process object until the process exits
// (so palrt reaps it even if every handle was closed before), then the worker reaps it,
// signals it and drops the registration. A process watched twice (two handles to one child
// share one object) is registered once.
#pragma once

#include <time.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace palrt::sync::internal {

class process_object;

class process_monitor {
 public:
  process_monitor() = default;
  process_monitor(const process_monitor&) = delete;
  process_monitor& operator=(const process_monitor&) = delete;
  ~process_monitor();

  // Any thread. Throws sync_error with the errno of epoll_create1/eventfd/epoll_ctl, having
  // registered nothing; std::bad_alloc.
  void watch(std::shared_ptr<process_object> process);
  // Whether the worker must sleep in epoll (some process is watched). seq_cst: the worker
  // stores its sleep word and then reads this, open_process() stores this (in watch()) and
  // then reads the sleep word (worker_state::wake); one of them sees the other, so a worker
  // never sleeps on its futex, deaf to exits, while a process is watched. It also orders
  // the descriptors, made before the first store, before any use by the worker.
  bool active() const noexcept { return watched_.load(std::memory_order_seq_cst) != 0; }

  // Worker only: waits up to `timeout` (none: without bound; zero: polls) for exits or a
  // poke(), and handles the exits it finds.
  void wait_and_handle(std::optional<timespec> timeout) noexcept;
  // Any thread: wakes a worker sleeping in wait_and_handle().
  void poke() noexcept;

 private:
  std::mutex mutex_;  // guards the map and the making of the descriptors
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::map<int, std::shared_ptr<process_object>> by_pidfd_;
  std::atomic<std::size_t> watched_{0};
};

}  // namespace palrt::sync::internal

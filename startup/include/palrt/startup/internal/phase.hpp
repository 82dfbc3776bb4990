// SPDX-License-Identifier: MIT
// One step of the bootstrap. The bootstrap starts a list of phases in order and times each,
// and returns without waiting for their threads to run their loops. If a phase throws, the
// phases already started are stopped before the failure is reported. Stopping (shutdown, or
// that unwinding) asks every phase to stop, in reverse order, and then joins them in reverse
// order, so their threads wind down at the same time: one stop request and one join each. Adding a
// service is adding a phase object and one line in make_phases() (phases.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/internal/baselines.hpp"

namespace palrt::startup::internal {

class phase {
 public:
  virtual ~phase() = default;
  virtual std::string_view name() const noexcept = 0;
  // Throws std::system_error (thread_start_error, barrier_error, ...) on failure, having
  // undone its own partial work. Returns once its threads exist, before they run their loops.
  virtual void start(runtime_services& services) = 0;
  // Asks the phase's threads to finish, without waiting.
  virtual void request_stop(runtime_services&) noexcept {}
  // Undoes start() after request_stop(), which it does not repeat: joins the threads. false
  // if a thread could not be joined within `timeout`.
  virtual bool stop(runtime_services& services, std::chrono::nanoseconds timeout) noexcept = 0;
};

// The phases for these options, in the order they run.
std::vector<std::unique_ptr<phase>> make_phases(const options& opts, ordering order);

// What the phases create and destroy.
class services_access {
 public:
  static std::unique_ptr<gc::handle_table>& handle_table(runtime_services& s) noexcept { return s.handle_table_; }
  static std::unique_ptr<gc::collector>& collector(runtime_services& s) noexcept { return s.collector_; }
  static std::unique_ptr<gc::finalizer_thread>& finalizer(runtime_services& s) noexcept { return s.finalizer_; }
  static std::unique_ptr<sync::sync_manager>& sync_manager(runtime_services& s) noexcept { return s.sync_manager_; }
};

}  // namespace palrt::startup::internal

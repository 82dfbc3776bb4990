// One step of the bootstrap. The bootstrap starts a list of phases in order and times each;
// then it waits until every phase's threads run (so their start-up latencies overlap). If a
// phase throws, the phases already started are stopped before the failure is reported.
// Stopping (shutdown, or that unwinding) asks every phase to stop, in reverse order, and
// then joins them in reverse order, so their threads wind down at the same time. Adding a
// service is adding a phase object and one line in make_phases() (phases.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "palrt/startup/ordering.hpp"
#include "palrt/sync/finalizer_thread.hpp"
#include "palrt/sync/sync_manager.hpp"

namespace palrt::startup {

struct options;

// The services a runtime owns; phases create and start them, later phases may use earlier
// ones (the handle table will be created before the finalizer that sweeps it).
struct runtime_services {
  std::unique_ptr<sync::finalizer_thread> finalizer;
  std::unique_ptr<sync::sync_manager> sync_manager;
};

class phase {
 public:
  virtual ~phase() = default;
  virtual std::string_view name() const noexcept = 0;
  // Throws std::system_error (thread_start_error, barrier_error, ...) on failure, having
  // undone its own partial work. May return before the threads it started run.
  virtual void start(runtime_services& services) = 0;
  // Returns once the threads start() created run their loops.
  virtual void wait_until_running(runtime_services&) {}
  // Asks the phase's threads to finish, without waiting.
  virtual void request_stop(runtime_services&) noexcept {}
  // Undoes start() (after request_stop()). false if a thread could not be joined within
  // `timeout`.
  virtual bool stop(runtime_services& services, std::chrono::nanoseconds timeout) noexcept = 0;
};

// The phases for these options, in the order they run.
std::vector<std::unique_ptr<phase>> make_phases(const options& opts);

}  // namespace palrt::startup

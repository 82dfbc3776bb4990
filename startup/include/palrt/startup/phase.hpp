// One step of the bootstrap. The bootstrap runs a list of phases in order, times each, and
// if one throws, stops the ones already started in reverse order before reporting the
// failure; shutdown stops them all in reverse order. Adding a service is adding a phase
// object and one line in make_phases() (phases.cpp).
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
  // undone its own partial work.
  virtual void start(runtime_services& services) = 0;
  // Undoes start(). false if a thread could not be joined within `timeout`.
  virtual bool stop(runtime_services& services, std::chrono::nanoseconds timeout) noexcept = 0;
};

// The phases for these options, in the order they run.
std::vector<std::unique_ptr<phase>> make_phases(const options& opts);

}  // namespace palrt::startup

// SPDX-License-Identifier: MIT
// The bootstrap's phases. Each is small on purpose: the order lives in make_phases(), the
// mechanism (timing, unwinding) in bootstrap.cpp.
#include "palrt/pal/internal/earlier_registration.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/internal/phase.hpp"
#include "palrt/startup/preload_probe.hpp"

namespace palrt::startup::internal {
namespace {

// The preload shim's record of the registration it made, for pal to take instead of counting
// threads itself (pal/internal/earlier_registration.hpp). pal asks only when the bootstrap's
// registration found the process registered already, so a process without the shim never
// looks the shim up.
std::optional<pal::internal::earlier_registration> shim_registration() noexcept {
  const std::optional<preload_status> shim = find_preload_shim();
  if (!shim || !shim->registered) return std::nullopt;
  return pal::internal::earlier_registration{shim->threads_at_registration, shim->fast_path_inferred};
}

// Registration (unless no-membarrier) and the choice of barrier strategy. Cannot be undone:
// the kernel keeps a registration for the life of the process, and nothing needs undoing.
class process_barrier_phase final : public phase {
 public:
  process_barrier_phase(pal::registration_mode mode, pal::registration_census census) : mode_(mode), census_(census) {}
  std::string_view name() const noexcept override { return "process-barrier"; }
  void start(runtime_services&) override {
    pal::internal::initialize_process_barrier(mode_, census_, &shim_registration);
  }
  bool stop(runtime_services&, std::chrono::nanoseconds) noexcept override { return true; }

 private:
  pal::registration_mode mode_;
  pal::registration_census census_;
};

// The handle table and the embedded collector that sweeps it. No thread: nothing to stop
// (both are destroyed with the runtime, after the finalizer).
class handle_table_phase final : public phase {
 public:
  std::string_view name() const noexcept override { return "handle-table"; }
  void start(runtime_services& s) override {
    services_access::handle_table(s) = std::make_unique<gc::handle_table>();
    services_access::collector(s) = std::make_unique<gc::collector>(*services_access::handle_table(s));
  }
  bool stop(runtime_services&, std::chrono::nanoseconds) noexcept override { return true; }
};

class finalizer_phase final : public phase {
 public:
  std::string_view name() const noexcept override { return "finalizer"; }
  void start(runtime_services& s) override {
    auto finalizer = std::make_unique<gc::finalizer_thread>(*services_access::collector(s));
    finalizer->launch();
    services_access::finalizer(s) = std::move(finalizer);
  }
  void request_stop(runtime_services& s) noexcept override {
    if (services_access::finalizer(s)) services_access::finalizer(s)->request_stop();
  }
  bool stop(runtime_services& s, std::chrono::nanoseconds timeout) noexcept override {
    return !services_access::finalizer(s) || services_access::finalizer(s)->stop(timeout);
  }
};

class sync_manager_phase final : public phase {
 public:
  explicit sync_manager_phase(sync_worker_start when) : when_(when) {}
  std::string_view name() const noexcept override { return "sync-manager"; }
  void start(runtime_services& s) override {
    auto manager = std::make_unique<sync::sync_manager>();
    if (when_ == sync_worker_start::eager) manager->launch_worker();
    services_access::sync_manager(s) = std::move(manager);
  }
  void request_stop(runtime_services& s) noexcept override {
    if (services_access::sync_manager(s)) services_access::sync_manager(s)->request_stop();
  }
  bool stop(runtime_services& s, std::chrono::nanoseconds timeout) noexcept override {
    return !services_access::sync_manager(s) || services_access::sync_manager(s)->stop(timeout);
  }

 private:
  sync_worker_start when_;
};

}  // namespace

std::vector<std::unique_ptr<phase>> make_phases(const options& opts, ordering order) {
  std::vector<std::unique_ptr<phase>> phases;
  auto barrier = std::make_unique<process_barrier_phase>(
      order == ordering::no_membarrier ? pal::registration_mode::skip_membarrier
                                       : pal::registration_mode::register_membarrier,
      opts.count_threads_at_registration ? pal::registration_census::always : pal::registration_census::if_slow);
  if (order != ordering::threads_first) phases.push_back(std::move(barrier));
  // Service phases, in the order later ones may use earlier ones.
  phases.push_back(std::make_unique<handle_table_phase>());
  phases.push_back(std::make_unique<finalizer_phase>());
  phases.push_back(std::make_unique<sync_manager_phase>(opts.sync_worker));
  if (order == ordering::threads_first) phases.push_back(std::move(barrier));
  return phases;
}

}  // namespace palrt::startup::internal

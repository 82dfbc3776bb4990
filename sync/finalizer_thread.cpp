#include "palrt/sync/finalizer_thread.hpp"

namespace palrt::sync {

finalizer_thread::finalizer_thread()
    : thread_("palrt-finalizer", [this](const std::atomic<bool>& stop) { drain(stop); }) {}

void finalizer_thread::drain(const std::atomic<bool>& /*stop_requested*/) {
  // The finalization queue arrives with the handle-table issue; until then a wake-up has
  // nothing to drain.
}

}  // namespace palrt::sync

// SPDX-License-Identifier: MIT
// The smallest correct palrt host: bootstrap first, before the host starts any thread of its
// own, then use the runtime, then shut down.
#include <cstdio>

#include <palrt/pal/compat.hpp>  // FlushProcessWriteBuffers(), CoreCLR's name
#include <palrt/pal/process_barrier.hpp>
#include <palrt/pal/thread_factory.hpp>
#include <palrt/startup/bootstrap.hpp>
#include <palrt/sync/event.hpp>
#include <palrt/sync/wait.hpp>

int main() {
  std::unique_ptr<palrt::startup::runtime> rt;
  try {
    rt = palrt::startup::bootstrap();  // registered-first: membarrier while single-threaded
  } catch (const palrt::startup::startup_error& e) {
    std::fprintf(stderr, "host: %s\n", e.what());
    return 1;
  }
  const auto& report = rt->report();
  std::printf("registered in %.1f us (%s); barrier: %s\n", report.barrier.registration_ns / 1e3,
              report.barrier.fast_path_inferred ? "the kernel's fast path, inferred from its duration"
                                                : "not the fast path",
              std::string(palrt::pal::to_string(report.barrier.strategy)).c_str());

  // The host's own threads go through the factory too, so they start after registration.
  int answer = 0;
  auto worker = palrt::pal::start_thread({"host-worker", 0}, [&answer] { answer = 42; });
  worker.join();
  palrt::pal::flush_process_write_buffers();  // the process-wide barrier
  FlushProcessWriteBuffers();                 // the same, as CoreCLR's PAL spells it

  // The sync manager's worker starts on first use: post work to it, or invoke and wait.
  auto& manager = rt->services().sync_manager();
  palrt::sync::event_handle posted_ran(palrt::sync::event_reset::manual);
  manager.post(palrt::sync::work_priority::normal, [&posted_ran] { posted_ran.set(); });
  const int doubled = manager.invoke(palrt::sync::work_priority::high, [answer] { return answer * 2; });
  const bool signalled =
      palrt::sync::wait_one(posted_ran, std::chrono::seconds(10)).status == palrt::sync::wait_status::signalled;
  std::printf("sync manager: invoke returned %d, posted work %s\n", doubled, signalled ? "ran" : "did NOT run");

  const auto& down = rt->shutdown();
  std::printf("worker said %d; shutdown %s in %.1f us\n", answer, down.clean() ? "clean" : "NOT clean",
              down.duration_ns / 1e3);
  return down.clean() && signalled && doubled == 84 ? 0 : 1;
}

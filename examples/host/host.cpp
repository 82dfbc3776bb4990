// The smallest correct palrt host: bootstrap first, before the host starts any thread of its
// own, then use the runtime, then shut down.
#include <cstdio>

#include <palrt/pal/process_barrier.hpp>
#include <palrt/pal/thread_factory.hpp>
#include <palrt/startup/bootstrap.hpp>

int main() {
  std::unique_ptr<palrt::startup::runtime> rt;
  try {
    rt = palrt::startup::bootstrap();  // registered-first: membarrier while single-threaded
  } catch (const palrt::startup::startup_error& e) {
    std::fprintf(stderr, "host: %s\n", e.what());
    return 1;
  }
  const auto& report = rt->report();
  std::printf("registered with %d thread(s) alive in %.1f us; barrier: %s\n",
              report.barrier.threads_at_registration, report.barrier.registration_ns / 1e3,
              std::string(palrt::pal::to_string(report.barrier.strategy)).c_str());

  // The host's own threads go through the factory too, so they start after registration.
  int answer = 0;
  auto worker = palrt::pal::start_thread({"host-worker", 0}, [&answer] { answer = 42; });
  worker.join();
  FlushProcessWriteBuffers();  // the process-wide barrier, as CoreCLR's PAL spells it

  const auto& down = rt->shutdown();
  std::printf("worker said %d; shutdown %s in %.1f us\n", answer, down.clean() ? "clean" : "NOT clean",
              down.duration_ns / 1e3);
  return down.clean() ? 0 : 1;
}

// The smallest correct palrt host: bootstrap first, before the host starts any thread of its
// own, then use the runtime, then shut down.
#include <cstdio>

#include <palrt/pal/compat.hpp>  // FlushProcessWriteBuffers(), CoreCLR's name
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

  const auto& down = rt->shutdown();
  std::printf("worker said %d; shutdown %s in %.1f us\n", answer, down.clean() ? "clean" : "NOT clean",
              down.duration_ns / 1e3);
  return down.clean() ? 0 : 1;
}

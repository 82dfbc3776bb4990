// SPDX-License-Identifier: MIT
// palrt-startup-reference-cpp: the C++ floor for palrt-startup's startup time.
//
// The C floor (palrt-startup-reference.c) is the least any process can pay; a C++ host pays
// the C++ runtime on top whatever it links (its start-up: relocations of the runtime's
// vtables and facets, its static initialisers, std::thread's own allocation), so palrt is
// judged against this one too: the same work as the C floor, written in C++20 and linked like
// palrt-startup (the same C++ runtime, statically or not as -Dstatic_runtime says, the same
// link arguments: tools/reference/meson.build). Whatever palrt-startup costs beyond this is
// palrt's.
//
//   palrt-startup-reference-cpp              registers, starts one std::thread, joins it
//   palrt-startup-reference-cpp --threads 2  two threads, started and then joined together
//   palrt-startup-reference-cpp --report json [--threads 2]
//       the same run, then one JSON line on stdout: how long registration took, and the
//       threads' start and join (CLOCK_MONOTONIC). What palrt-startup's bootstrap_ns plus
//       shutdown_ns is judged against (scripts/bench-startup.sh): palrt's bootstrap includes
//       its registration, so the floor's figure is registration_ns + start_join_ns. Only a
//       report run reads the clock; the timed runs do not.
//
// No <iostream>: with libstdc++ 12 every translation unit that includes it runs a static
// std::ios_base::Init, which palrt-startup's run does not pay either (scripts/bench-startup.sh
// times both). Messages go through stdio, as palrt-startup's do.
//
// Exit status: 0 on success; 1 with a one-line message on stderr if membarrier private
// expedited is unavailable or registration fails, or a thread cannot be started; 2 with a
// one-line usage message for any other arguments.
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>

namespace {

constexpr const char* tool = "palrt-startup-reference-cpp";

long membarrier(int cmd) { return ::syscall(SYS_membarrier, cmd, 0U, 0); }

long long now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  // Compared, not parsed, as in the C floor: this program's own startup is what is measured.
  // --report json, then --threads N, each at most once, in that order.
  int threads = 1;
  bool report = false;
  int i = 1;
  if (i + 1 < argc && std::strcmp(argv[i], "--report") == 0 && std::strcmp(argv[i + 1], "json") == 0) {
    report = true;
    i += 2;
  }
  if (i + 1 < argc && std::strcmp(argv[i], "--threads") == 0 &&
      (std::strcmp(argv[i + 1], "1") == 0 || std::strcmp(argv[i + 1], "2") == 0)) {
    threads = argv[i + 1][0] - '0';
    i += 2;
  }
  if (i != argc) {
    std::fprintf(stderr, "%s: usage: %s [--report json] [--threads 1|2]\n", tool, tool);
    return 2;
  }
  const long long registration_start = report ? now_ns() : 0;

  // QUERY first, as palrt does: a seccomp filter may deny membarrier outright, and a kernel
  // without the command answers REGISTER with EINVAL.
  const long mask = membarrier(MEMBARRIER_CMD_QUERY);
  if (mask < 0) {
    std::fprintf(stderr, "%s: membarrier QUERY failed: %s\n", tool, std::strerror(errno));
    return 1;
  }
  if (!(mask & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)) {
    std::fprintf(stderr, "%s: kernel lacks membarrier REGISTER_PRIVATE_EXPEDITED (mask 0x%lx)\n", tool, mask);
    return 1;
  }
  // While this is the only thread: the kernel's fast path (mm_users == 1).
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
    std::fprintf(stderr, "%s: membarrier REGISTER_PRIVATE_EXPEDITED failed: %s\n", tool, std::strerror(errno));
    return 1;
  }

  const long long threads_start = report ? now_ns() : 0;

  // All started before any is joined, as palrt's bootstrap starts its service threads and its
  // shutdown joins them. The threads do nothing: what counts is that they exist and are joined.
  std::thread started[2];
  for (int t = 0; t < threads; ++t) {
    try {
      started[t] = std::thread([] {});
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "%s: std::thread: %s\n", tool, e.what());
      // The threads already started are joined: a std::thread destroyed joinable terminates.
      for (int j = 0; j < t; ++j) started[j].join();
      return 1;
    }
  }
  for (int t = 0; t < threads; ++t) started[t].join();
  if (report) {
    const long long end = now_ns();
    std::printf("{\"tool\": \"%s\", \"threads\": %d, \"registration_ns\": %lld, \"start_join_ns\": %lld}\n", tool,
                threads, threads_start - registration_start, end - threads_start);
  }
  return 0;
}

// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include "palrt/core/thread_census.h"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"
#include "thread_state.hpp"

using namespace palrt;

TEST_CASE("thread census: counts threads as they start and after they are joined") {
  // Relative counts: a sanitizer runtime may start a thread of its own at the first
  // pthread_create, so the first started thread is the reference point.
  pal::wake_event release, started_first, started_second;
  auto first = pal::start_thread({"census-1", 0}, [&] {
    started_first.set();
    release.wait();
    release.set();  // pass the release on to the other thread
  });
  started_first.wait();
  const int with_one = palrt_threads_in_process();
  REQUIRE(with_one >= 2);
  auto second = pal::start_thread({"census-2", 0}, [&] {
    started_second.set();
    release.wait();
    release.set();
  });
  started_second.wait();
  CHECK(palrt_threads_in_process() == with_one + 1);
  release.set();
  first.join();
  second.join();
  // Joined threads leave the kernel's count a moment after join returns.
  CHECK(palrt::testing::count_settled(palrt_threads_in_process, with_one - 1) == with_one - 1);
}

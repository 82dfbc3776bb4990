#include <doctest/doctest.h>

#include "palrt/pal/thread_census.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"

using namespace palrt;

TEST_CASE("thread census: counts threads as they start and after they are joined") {
  const int before = pal::threads_in_process();
  REQUIRE(before >= 1);
  pal::wake_event release;
  pal::wake_event started[2];
  std::vector<pal::managed_thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.push_back(pal::start_thread({"census", 0}, [&, i] {
      started[i].set();
      release.wait();
      release.set();
    }));
  started[0].wait();
  started[1].wait();
  CHECK(pal::threads_in_process() == before + 2);
  release.set();
  for (auto& t : threads) t.join();
  CHECK(pal::threads_in_process() == before);
}

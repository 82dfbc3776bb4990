// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>

#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"
#include "scale.hpp"

using namespace palrt;
using namespace std::chrono_literals;

TEST_CASE("wake_event: a set before the wait is not lost, and is consumed once") {
  pal::wake_event e;
  e.set();
  CHECK(e.wait_for(0ns));
  CHECK_FALSE(e.wait_for(1ms));
}

TEST_CASE("wake_event: wait_for times out without a signal") {
  pal::wake_event e;
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(e.wait_for(20ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 20ms);
}

TEST_CASE("wake_event: every set() is seen by a waiting thread; no wake-up is lost (bounded)") {
  // Ping-pong: each side waits for the other's set; a lost wake-up stalls the run, which
  // wait_for turns into a reported loss instead of a hang.
  pal::wake_event ping, pong;
  const long rounds = 20000 * palrt::testing::scale();
  std::atomic<int> lost{0};
  auto t = pal::start_thread({"pong", 0}, [&] {
    for (long i = 0; i < rounds; ++i) {
      if (!ping.wait_for(2s)) {
        lost.fetch_add(1);
        return;
      }
      pong.set();
    }
  });
  long completed = 0;
  for (long i = 0; i < rounds; ++i) {
    ping.set();
    if (!pong.wait_for(2s)) break;
    ++completed;
  }
  t.join();
  CHECK_MESSAGE(completed == rounds, "round trips completed: " << completed << " of " << rounds);
  CHECK(lost.load() == 0);
}

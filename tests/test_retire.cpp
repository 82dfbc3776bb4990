// SPDX-License-Identifier: MIT
// gc::retire (palrt/gc/retire.hpp): a reclaim runs only after every read section that was
// open when it was retired has closed, batches run as they fill, nothing retired is lost
// (partial batches, exiting threads), and the drain's contract.
#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "palrt/gc/internal/grace_period.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/gc/retire.hpp"
#include "palrt/pal/wake_event.hpp"

using namespace std::chrono_literals;
namespace gc = palrt::gc;

namespace {

// What a test retires: a cell that counts its reclaims (a second reclaim is a double free).
struct cell {
  std::atomic<int> reclaimed{0};
};
void reclaim_cell(void* p) noexcept { static_cast<cell*>(p)->reclaimed.fetch_add(1, std::memory_order_relaxed); }

int reclaimed_in(const std::vector<cell>& cells) {
  int n = 0;
  for (const cell& c : cells) n += c.reclaimed.load(std::memory_order_relaxed);
  return n;
}

}  // namespace

TEST_CASE("retire: nothing runs while a reader that was inside when it was retired is still inside") {
  REQUIRE(gc::drain_retired());  // what earlier cases left
  std::vector<cell> cells(3 * gc::retire_batch_capacity);
  std::latch inside(1), retired(1);
  std::thread reader([&] {
    gc::read_section section;
    inside.count_down();
    retired.wait();
  });
  inside.wait();
  for (cell& c : cells) gc::retire(&c, reclaim_cell);  // three full batches: each tries to run
  CHECK(gc::reclaim_retired() == 0);
  CHECK(reclaimed_in(cells) == 0);
  CHECK_FALSE(gc::drain_retired(0ns));
  retired.count_down();
  reader.join();
  CHECK(gc::drain_retired());
  CHECK(reclaimed_in(cells) == static_cast<int>(cells.size()));
  for (const cell& c : cells) CHECK(c.reclaimed == 1);
}

TEST_CASE("retire: queued batches run once enough wait, a partial one when asked, each item once") {
  REQUIRE(gc::drain_retired());
  constexpr std::size_t full = gc::retire_scan_batches * gc::retire_batch_capacity;
  std::vector<cell> cells(full + 5);
  for (std::size_t i = 0; i < full; ++i) gc::retire(&cells[i], reclaim_cell);
  CHECK(reclaimed_in(cells) == static_cast<int>(full));  // no reader: all due at the scan
  for (std::size_t i = full; i < cells.size(); ++i) gc::retire(&cells[i], reclaim_cell);
  CHECK(reclaimed_in(cells) == static_cast<int>(full));  // partial: waits
  CHECK(gc::reclaim_retired() == 5);
  CHECK(gc::reclaim_retired() == 0);
  for (const cell& c : cells) CHECK(c.reclaimed == 1);
}

// A drain waits for the batches retired before it, queued or running on another thread, and
// not for those other threads retire after it began: else a thread that retires steadily
// (always a run in progress) would keep every drain waiting until its timeout.
TEST_CASE("retire: drain_retired waits for another thread's run of earlier batches, not of later ones") {
  REQUIRE(gc::drain_retired());
  static palrt::pal::wake_event running, release;
  (void)running.try_wait();  // auto-reset events: clear what an earlier subcase left
  (void)release.try_wait();
  auto blocking = [](void* p) noexcept {
    reclaim_cell(p);
    running.set();
    release.wait();
  };
  SUBCASE("earlier: waited for") {
    cell theirs;
    std::thread other([&] {
      gc::retire(&theirs, blocking);
      gc::reclaim_retired();  // runs it, and blocks inside
    });
    running.wait();
    CHECK_FALSE(gc::drain_retired(0ns));  // their batch was tagged before: it is still running
    release.set();
    other.join();
    CHECK(gc::drain_retired());
  }
  SUBCASE("later: not waited for") {
    cell mine, theirs;
    palrt::pal::wake_event go;
    std::thread other([&] {
      go.wait();
      gc::retire(&theirs, blocking);  // after the drain fixed its horizon
      gc::reclaim_retired();
    });
    struct window {
      palrt::pal::wake_event* go;
    } w{&go};
    palrt::gc::internal::retire_access::on_drain_horizon(
        [](void* c) {
          static_cast<window*>(c)->go->set();
          running.wait();  // their run is in progress when the drain first looks
        },
        &w);
    gc::retire(&mine, reclaim_cell);
    const bool drained = gc::drain_retired(2s);
    palrt::gc::internal::retire_access::on_drain_horizon(nullptr, nullptr);
    CHECK(drained);  // before: false after the whole timeout
    CHECK(mine.reclaimed == 1);
    release.set();
    other.join();
    CHECK(theirs.reclaimed == 1);
    CHECK(gc::drain_retired());
  }
}

TEST_CASE("retire: an exiting thread's partial batch is queued, and runs on another thread") {
  REQUIRE(gc::drain_retired());
  std::vector<cell> cells(7);
  std::thread t([&] {
    for (cell& c : cells) gc::retire(&c, reclaim_cell);
  });
  t.join();
  CHECK(reclaimed_in(cells) == 0);
  CHECK(gc::reclaim_retired() == 7);
  for (const cell& c : cells) CHECK(c.reclaimed == 1);
}

TEST_CASE("retire: a reclaim may retire again and drain, without a deadlock or a lost item") {
  REQUIRE(gc::drain_retired());
  static cell inner;
  static std::atomic<bool> drained{false};
  inner.reclaimed = 0;
  drained = false;
  cell outer;
  gc::retire(&outer, [](void* p) noexcept {
    reclaim_cell(p);
    gc::retire(&inner, reclaim_cell);
    drained = gc::drain_retired(1s);  // the batch this thread is running does not hold it
  });
  CHECK(gc::drain_retired());
  CHECK(outer.reclaimed == 1);
  CHECK(inner.reclaimed == 1);
  CHECK(drained);
}

TEST_CASE("retire: drain_retired refuses to run inside the caller's own read section") {
  gc::read_section section;
  CHECK_THROWS_AS((void)gc::drain_retired(), std::logic_error);
}

TEST_CASE("retire: threads retiring at once lose and repeat nothing") {
  REQUIRE(gc::drain_retired());
  constexpr std::size_t per_thread = 10 * gc::retire_batch_capacity + 3;
  std::vector<cell> cells(4 * per_thread);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        gc::read_section section;  // readers and reclaimers in the same threads
        gc::retire(&cells[t * per_thread + i], reclaim_cell);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(gc::drain_retired());
  int lost = 0, repeated = 0;
  for (const cell& c : cells) {
    lost += c.reclaimed == 0;
    repeated += c.reclaimed > 1;
  }
  INFO("lost " << lost << ", reclaimed more than once " << repeated);
  CHECK(lost == 0);
  CHECK(repeated == 0);
}

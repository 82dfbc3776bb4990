// SPDX-License-Identifier: MIT
// An embedded identity cache (palrt/interop/identity_cache.hpp, docs/INTEROP.md): a host that
// hands out one managed wrapper per native object, on palrt's own collector. It shows the
// three things a host relies on:
//   1. two threads asking at once for the wrapper of one native object both get the same one;
//   2. once that wrapper has died, the next lookup makes a new one (a dead wrapper is never
//      handed out), and the dead one's cleanup later leaves the new entry alone;
//   3. when the last wrapper has died, a collection empties the cache.
// scripts/test.sh builds it against an installed palrt and runs it:
//   c++ -std=c++20 identity_cache.cpp $(pkg-config --cflags --libs palrt)
// Exit status 0 and one line when each step did that, 1 with a line on stderr per failure.
#include <atomic>
#include <chrono>
#include <cstdio>

#include <palrt/gc/finalizer_thread.hpp>
#include <palrt/gc/object.hpp>
#include <palrt/interop/identity_cache.hpp>
#include <palrt/pal/thread_factory.hpp>
#include <palrt/startup/bootstrap.hpp>

namespace {

struct native_file {  // what the host's native side hands out
  int fd;
};

// The managed wrapper of a native_file. Deriving from wrapper_object lets the cache keep its
// record (the identity and a weak handle) in the wrapper itself instead of a side table.
struct file_wrapper : palrt::gc::object, palrt::interop::wrapper_object {
  file_wrapper(const native_file* f, int n) : file(f), serial(n) {}
  const native_file* const file;
  const int serial;  // which factory call made it: tells a new wrapper from an old one
};

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "identity-cache: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  auto rt = palrt::startup::bootstrap();  // first: the collector and the finalizer thread
  auto& services = rt->services();
  palrt::interop::identity_cache cache(services.collector());

  std::atomic<int> made{0};
  // The host's one way from a native object to its wrapper. The factory runs with no lock
  // held; when two threads race, both may run it, one wins, and the loser's wrapper is dropped.
  auto wrapper_of = [&](const native_file& f) {
    return cache.get_or_create<file_wrapper>(&f, [&](const void* identity) {
      return palrt::gc::make_object<file_wrapper>(services.collector(), static_cast<const native_file*>(identity),
                                                  ++made);
    });
  };
  // Collects until the records of the wrappers that died have left the cache: a collection
  // frees a dead wrapper, whose record then dies and goes to the finalizer thread, which
  // removes the entry by its exact handle; a later collection frees the record. Three rounds
  // of collect() and waiting for the finalizer cover that chain, as palrt's suites do.
  auto settle = [&] {
    for (int round = 0; round < 3; ++round) {
      services.collector().collect();
      check(services.finalizer().wait_for_pending_finalizers(10s) == palrt::gc::pending_finalizers::finalized,
            "the finalizer thread did not finish within 10 s");
    }
  };

  native_file file{3};

  // 1. Two threads ask for the wrapper of one native object at once.
  palrt::gc::ref<file_wrapper> got[2];
  {
    auto first = palrt::pal::start_thread({"asker-1", 0}, [&] { got[0] = wrapper_of(file); });
    auto second = palrt::pal::start_thread({"asker-2", 0}, [&] { got[1] = wrapper_of(file); });
    first.join();
    second.join();
  }
  check(got[0] && got[0].get() == got[1].get(), "two threads got two wrappers for one native object");
  check(got[0] && got[0]->file == &file, "the wrapper is not the native object's");
  check(wrapper_of(file).get() == got[0].get(), "a third lookup made another wrapper while the first lived");
  const int first_serial = got[0] ? got[0]->serial : 0;
  const int made_by_askers = made.load();
  const auto races_lost = cache.counters().races_lost;

  // 2. The wrapper dies (its last reference goes); the next lookup makes a new one at once.
  got[0].reset();
  got[1].reset();
  palrt::gc::ref<file_wrapper> again = wrapper_of(file);
  check(again && again->serial != first_serial, "a dead wrapper was handed out again");
  check(cache.counters().dead_replaced == 1, "the dead wrapper's entry was not replaced");
  settle();  // the dead wrapper's record retires: it removes its own entry only, not the new one
  check(cache.try_get<file_wrapper>(&file).get() == again.get(), "the old record removed the new entry");
  const int second_serial = again ? again->serial : 0;

  // 3. The last wrapper dies; the cache is empty after the collections.
  again.reset();
  settle();
  const auto counters = cache.counters();
  check(counters.entries == 0, "an entry of a dead wrapper was left in the cache");
  check(!cache.try_get<file_wrapper>(&file), "a lookup found a wrapper after every one died");

  std::printf("identity-cache: 2 threads, 1 wrapper (factory ran %d time(s), %llu race(s) lost); "
              "wrapper #%d died, the next lookup made #%d; %zu entries left\n",
              made_by_askers, static_cast<unsigned long long>(races_lost), first_serial, second_serial,
              counters.entries);
  const bool clean = rt->shutdown().clean();
  check(clean, "shutdown was not clean");
  return failures == 0 ? 0 : 1;
}

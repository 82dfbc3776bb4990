// SPDX-License-Identifier: MIT
// A minimal host on the Boehm collector, built against an installed palrt with pkg-config
// (palrt-boehm.pc: libpalrt-boehm.a, libpalrt.a and -lgc). scripts/test.sh builds and runs
// it; it prints one line and exits 0 if palrt's handles followed Boehm's collection:
//   c++ -std=c++20 -DGC_THREADS host.cpp $(pkg-config --static --cflags --libs palrt-boehm)
#include <gc/gc.h>

#include <cstdio>

#include <palrt/boehm/collector_binding.hpp>
#include <palrt/gc/handle_table.hpp>

namespace {
// Made in a frame of its own, so no stale word of main's frame keeps it.
[[gnu::noinline]] palrt::gc::handle weak_to_garbage(palrt::gc::handle_table& table) {
  void* garbage = GC_MALLOC(64);
  return table.allocate(palrt::gc::handle_kind::weak_short, garbage);
}
}  // namespace

int main() {
  GC_INIT();
  palrt::gc::handle_table table;
  palrt::boehm::collector_binding binding(table);
  // Held only by a strong handle (palrt's memory is not scanned): a root through the binding.
  palrt::gc::handle strong = table.allocate(palrt::gc::handle_kind::strong, GC_MALLOC(64));
  palrt::gc::handle weak = weak_to_garbage(table);
  for (int i = 0; i < 3 && table.gated_target(weak); ++i) GC_gcollect();
  const bool kept = GC_base(table.target(strong)) == table.target(strong);
  const bool cleared = table.gated_target(weak) == nullptr;
  std::printf("boehm host: %llu collections; strong target kept: %s; weak target cleared: %s\n",
              static_cast<unsigned long long>(binding.counters().collections), kept ? "yes" : "no",
              cleared ? "yes" : "no");
  table.release(weak);
  table.release(strong);
  return kept && cleared ? 0 : 1;
}

// SPDX-License-Identifier: MIT
// palrt-copying-bench: the copying host's young-collection pause, with and without 100,000
// old weak handles, printed as one JSON object per metric on stdout (the shape
// bench_boehm.cpp prints). bench_copying.py runs it for each variant, interleaved, and keeps
// the medians.
//
//   palrt-copying-bench --case copying/pause/young --variant palrt|none [--collections N] [--quick]
//
// copying/pause/young: 100,000 old objects (held from 100 old arrays); variant palrt adds a
// weak_short handle to each (their blocks aged by two young collections), variant none has
// none. Then N young collections (200 by default), before each of which the mutator
// allocates 300 young objects (100 of them kept) and 40 young handles (20 strong, 20
// weak_short, released after the collection). `pause_ns`: the median of the collections'
// world-stopped work (heap::collect's collection_stats::pause_ns). The ages are what should
// make the 100,000 old handles cost nothing here (handle_table.hpp, "Generations"): the
// target is palrt <= 1.1x none.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "heap.hpp"
#include "palrt/gc/handle_table.hpp"

using namespace copying_host;
namespace gc = palrt::gc;

namespace {

void emit(const std::string& c, const std::string& variant, int threads, const char* metric, double value) {
  std::printf("{\"case\": \"%s\", \"variant\": \"%s\", \"threads\": %d, \"metric\": \"%s\", \"value\": %.3f}\n",
              c.c_str(), variant.c_str(), threads, metric, value);
}

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct pause_log : collection_observer {
  std::vector<std::int64_t> young_pauses;
  void after(heap&, const collection_stats& s) override {
    if (s.kind == collection_kind::young) young_pauses.push_back(s.pause_ns);
  }
};

int young_pause(const std::string& variant, int collections) {
  constexpr std::size_t old_objects = 100'000;
  constexpr std::size_t per_array = 1000;
  constexpr std::size_t arrays = old_objects / per_array;
  gc::handle_table table;
  heap_options options;
  options.nursery_bytes = std::size_t{4} << 20;  // the old objects are made in one nursery
  options.old_bytes = std::size_t{64} << 20;
  options.full_every = 0;  // only the collections asked for
  heap h(table, options);
  mutator m;
  h.attach(m);
  m.roots.assign(arrays + 100, nullptr);
  for (std::size_t a = 0; a < arrays; ++a) {
    m.roots[a] = h.allocate(m, per_array, 0);
    for (std::size_t j = 0; j < per_array; ++j) h.write(m, m.roots[a], j, h.allocate(m, 0, 16));
  }
  h.collect(&m, collection_kind::full);
  std::vector<gc::handle> old_handles;
  if (variant == "palrt") {
    old_handles.reserve(old_objects);
    for (std::size_t a = 0; a < arrays; ++a)
      for (std::size_t j = 0; j < per_array; ++j)
        old_handles.push_back(table.allocate(gc::handle_kind::weak_short, m.roots[a]->field(j)));
  }
  // The first young collection walks the new blocks and ages them; from then on they are old.
  h.collect(&m, collection_kind::young);
  h.collect(&m, collection_kind::young);
  pause_log log;
  h.set_observer(&log);
  std::vector<gc::handle> young_handles;
  for (int c = 0; c < collections; ++c) {
    for (std::size_t i = 0; i < 300; ++i) {
      object* o = h.allocate(m, 1, 16);
      if (i % 3 == 0) m.roots[arrays + i / 3] = o;
      if (i < 40)
        young_handles.push_back(table.allocate(i < 20 ? gc::handle_kind::strong : gc::handle_kind::weak_short, o));
    }
    h.collect(&m, collection_kind::young);
    for (gc::handle hd : young_handles) (void)table.release(hd);
    young_handles.clear();
  }
  h.set_observer(nullptr);
  std::size_t cleared = 0;
  for (gc::handle hd : old_handles) cleared += gc::handle_table::target(hd) == nullptr;
  for (gc::handle hd : old_handles) (void)table.release(hd);
  h.detach(m);
  if (cleared) {
    std::fprintf(stderr, "palrt-copying-bench: %zu weak handles of live old objects cleared\n", cleared);
    return 1;
  }
  emit("copying/pause/young", variant, 1, "pause_ns", static_cast<double>(median(log.young_pauses)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"palrt-copying-bench: the copying host's young pause with and without old weak handles"};
  std::string which = "copying/pause/young";
  std::string variant = "palrt";
  int collections = 200;
  bool quick = false;
  app.add_option("--case", which, "copying/pause/young")->check(CLI::IsMember({"copying/pause/young"}));
  app.add_option("--variant", variant, "palrt | none")->check(CLI::IsMember({"palrt", "none"}));
  app.add_option("--collections", collections, "young collections measured")->check(CLI::Range(1, 1'000'000));
  app.add_flag("--quick", quick, "a short run for smoke tests (20 collections)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "palrt-copying-bench: %s\n", e.what());
    return 2;
  }
  if (quick) collections = std::min(collections, 20);
  const int result = young_pause(variant, collections);
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "palrt-copying-bench: cannot write the result to stdout\n");
    return 1;
  }
  return result;
}

// SPDX-License-Identifier: MIT
// A plugin on libpalrt.so, loaded with dlopen() by host.cpp: a module with types of its own
// derived from palrt's, run on the host's runtime (one libpalrt.so in the process, so one
// collector, one finalizer thread, one process barrier for the host and all its plugins).
// dlopen() binds its references to palrt's type information and vtables, so it loads only
// if libpalrt.so exports them. Built as host.cpp says:
//   c++ -std=c++20 -shared -fPIC plugin.cpp -o plugin.so $(pkg-config --cflags --libs palrt-shared)
#include <atomic>
#include <chrono>
#include <cstdio>

#include <palrt/gc/finalizer_thread.hpp>
#include <palrt/gc/typed_handles.hpp>
#include <palrt/startup/bootstrap.hpp>

namespace {

std::atomic<int> finalized{0};

struct plugin_object : palrt::gc::finalizable {
  void finalize() override { finalized.fetch_add(1); }  // on the host's finalizer thread
};

struct plugin_node : palrt::gc::object {
  explicit plugin_node(palrt::gc::ref<plugin_object> o) : payload(std::move(o)) {}
  palrt::gc::ref<plugin_object> payload;
};

int fail(const char* what) {
  std::fprintf(stderr, "plugin: %s\n", what);
  return 1;
}

}  // namespace

// 0 when the plugin's objects lived, died, were finalized and freed on the host's runtime.
extern "C" int palrt_example_plugin_run(palrt::startup::runtime_services& s) {
  constexpr int count = 100;
  const auto created_before = s.collector().counters().objects_created;
  {
    palrt::gc::ref<plugin_node> last;
    for (int i = 0; i < count; ++i)
      last = palrt::gc::make_object<plugin_node>(s.collector(), palrt::gc::make_object<plugin_object>(s.collector()));
    palrt::gc::weak_handle<plugin_node> weak(last, palrt::gc::handle_kind::weak_long);
    if (!weak.try_get()) return fail("a live object's weak handle gave nothing");  // `last` holds it
  }
  // Every object died with its last reference; collect, finalize, collect again to free.
  s.collector().collect();
  if (s.finalizer().wait_for_pending_finalizers(std::chrono::seconds(10)) != palrt::gc::pending_finalizers::finalized)
    return fail("the host's finalizer thread did not finalize the plugin's objects within 10 s");
  s.collector().collect();
  // Nothing of the plugin's is left to free, so the host may unload it.
  if (!s.collector().synchronize()) return fail("objects still await their grace period");
  if (finalized.load() != count) return fail("not every plugin_object was finalized once");
  if (s.collector().counters().objects_created - created_before != 2 * count) return fail("objects were not counted");
  return 0;
}

// SPDX-License-Identifier: MIT
// A host on libpalrt.so whose own types derive from palrt's classes: the `finalizable` and
// `com_proxy` examples of docs/GC.md and docs/INTEROP.md as one program. Its types' type information names
// palrt's (typeinfo for palrt::gc::finalizable, ...), which only libpalrt.so defines, so this
// links only if libpalrt.so exports palrt's type information and vtables. Each path given on
// the command line is a plugin (plugin.cpp) it loads with dlopen() and runs on its runtime:
// one libpalrt.so, one runtime, for the host and every plugin. scripts/test.sh builds it
// with g++ and clang++, through pkg-config and CMake, and runs it with the plugin:
//   c++ -std=c++20 host.cpp -o shared-host $(pkg-config --cflags --libs palrt-shared) -ldl
//   c++ -std=c++20 -shared -fPIC plugin.cpp -o plugin.so $(pkg-config --cflags --libs palrt-shared)
//   ./shared-host ./plugin.so
// Exit status 0 when every step did what those documents say, 1 with a line on stderr otherwise.
#include <dlfcn.h>

#include <cstdio>
#include <exception>
#include <typeinfo>

#include <palrt/interop/identity_cache.hpp>
#include <palrt/startup/bootstrap.hpp>
#include <palrt/gc/finalizer_thread.hpp>
#include <palrt/gc/typed_handles.hpp>
#include <palrt/sync/semaphore.hpp>

namespace {

int finalized = 0;  // by the finalizer thread; read after wait_for_pending_finalizers()

// docs/GC.md, "Handles, objects and the finalizer".
struct wrapper : palrt::gc::finalizable {
  void finalize() override { ++finalized; }  // runs on the finalizer thread
};

// docs/INTEROP.md.
struct com_proxy : palrt::gc::object, palrt::interop::wrapper_object {
  explicit com_proxy(const void* id) : native(id) {}
  const void* native;
};

int fail(const char* what) {
  std::fprintf(stderr, "shared-host: %s\n", what);
  return 1;
}

int objects_and_finalizer(palrt::startup::runtime_services& s) {
  palrt::gc::ref<wrapper> w = palrt::gc::make_object<wrapper>(s.collector());
  palrt::gc::weak_handle<wrapper> weak(w);
  w.reset();  // dead: the count reached zero, for good
  if (weak.try_get()) return fail("a dead object came back through its weak handle");
  s.collector().collect();  // clears weak, queues the finalizer
  if (s.finalizer().wait_for_pending_finalizers(std::chrono::seconds(10)) != palrt::gc::pending_finalizers::finalized)
    return fail("the finalizer did not run within 10 s");
  if (finalized != 1 || !weak.cleared()) return fail("the object was not finalized once and its handle cleared");
  s.collector().collect();  // frees it, after a grace period
  return 0;
}

int identity_cache(palrt::startup::runtime_services& s) {
  static const int native_object = 0;
  const void* native = &native_object;
  palrt::interop::identity_cache cache(s.collector());
  auto p = cache.get_or_create<com_proxy>(
      native, [&](const void* id) { return palrt::gc::make_object<com_proxy>(s.collector(), id); });
  palrt::gc::ref<com_proxy> same = cache.try_get<com_proxy>(native);
  if (!p || same.get() != p.get() || p->native != native) return fail("the identity cache did not give one wrapper");
  // The wrapper through its palrt base, back to the host's type: type information of the
  // host's class that names palrt's.
  palrt::gc::object* base = p.get();
  if (dynamic_cast<com_proxy*>(base) != p.get()) return fail("dynamic_cast from palrt::gc::object failed");
  return 0;
}

// An exception libpalrt.so throws, caught by its type in the host.
int palrt_exception() {
  try {
    palrt::sync::semaphore_handle past_its_maximum(2, 1);
  } catch (const palrt::sync::sync_error&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shared-host: semaphore_handle(2, 1) threw %s (%s), not palrt::sync::sync_error\n",
                 typeid(e).name(), e.what());
    return 1;
  }
  return fail("semaphore_handle(2, 1) did not throw");
}

using plugin_entry = int (*)(palrt::startup::runtime_services&);

int run_plugin(const char* path, palrt::startup::runtime_services& s) {
  void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    std::fprintf(stderr, "shared-host: dlopen: %s\n", dlerror());
    return 1;
  }
  auto entry = reinterpret_cast<plugin_entry>(dlsym(module, "palrt_example_plugin_run"));
  if (!entry) {
    std::fprintf(stderr, "shared-host: %s has no palrt_example_plugin_run\n", path);
    return 1;
  }
  const int status = entry(s);
  // The plugin's objects are freed and its code is no longer needed: unload it, as a host
  // unloads a module it is done with.
  dlclose(module);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<palrt::startup::runtime> rt;
  try {
    rt = palrt::startup::bootstrap();
  } catch (const palrt::startup::startup_error& e) {  // caught by its type, from libpalrt.so
    std::fprintf(stderr, "shared-host: %s\n", e.what());
    return 1;
  }
  auto& s = rt->services();
  int status = objects_and_finalizer(s);
  if (status == 0) status = identity_cache(s);
  if (status == 0) status = palrt_exception();
  for (int i = 1; i < argc && status == 0; ++i) status = run_plugin(argv[i], s);
  if (!rt->shutdown().clean()) return fail("shutdown was not clean");
  if (status == 0)
    std::printf("shared-host: objects, finalizer, identity cache and %d plugin(s) on libpalrt.so\n", argc - 1);
  return status;
}

// SPDX-License-Identifier: MIT
// A module on libpalrt.so whose classes derive from palrt's (gc::object, gc::finalizable,
// interop::wrapper_object), as a host's wrappers do: their type information and vtables
// name palrt's, which only libpalrt.so defines, so dlopen() binds this module to them and
// fails if libpalrt.so does not export them. palrt-test-copies-host loads it and calls
// palrt_test_module_main(): the shared_library suite checks that it loads and that each step
// below does what palrt's headers say, palrt's code in libpalrt.so and the module's in here.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <typeinfo>

#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/typed_handles.hpp"
#include "palrt/interop/identity_cache.hpp"
#include "palrt/sync/semaphore.hpp"

namespace {

std::atomic<int> finalized{0};

struct module_finalizable : palrt::gc::finalizable {
  void finalize() override { finalized.fetch_add(1); }
};

struct module_proxy : palrt::gc::object, palrt::interop::wrapper_object {
  explicit module_proxy(const void* id) : native(id) {}
  const void* native;
};

int fail(const char* what) {
  std::fprintf(stderr, "derived-types-module: %s\n", what);
  return 1;
}

}  // namespace

extern "C" [[gnu::visibility("default")]] int palrt_test_module_main() {
  palrt::gc::handle_table table;
  palrt::gc::collector collector(table);
  palrt::gc::finalizer_thread finalizer(collector);
  finalizer.start();
  int status = 0;
  {
    palrt::gc::ref<module_finalizable> f = palrt::gc::make_object<module_finalizable>(collector);
    palrt::gc::object* base = f.get();
    // dynamic_cast from palrt's class to the module's, through their type information.
    if (dynamic_cast<module_finalizable*>(base) != f.get()) status = fail("dynamic_cast from gc::object failed");
    static const int native_object = 0;
    palrt::interop::identity_cache cache(collector);
    auto p = cache.get_or_create<module_proxy>(
        &native_object, [&](const void* id) { return palrt::gc::make_object<module_proxy>(collector, id); });
    if (cache.try_get<module_proxy>(&native_object).get() != p.get())
      status = fail("the identity cache lost the wrapper");
  }
  collector.collect();
  if (finalizer.wait_for_pending_finalizers(std::chrono::seconds(10)) != palrt::gc::pending_finalizers::finalized)
    status = fail("the finalizer did not finalize within 10 s");
  else if (finalized.load() != 1)
    status = fail("the module's finalizable was not finalized once");
  // An exception thrown inside libpalrt.so, caught here by its type.
  try {
    palrt::sync::semaphore_handle past_its_maximum(2, 1);
    status = fail("semaphore_handle(2, 1) did not throw");
  } catch (const palrt::sync::sync_error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "derived-types-module: semaphore_handle(2, 1) threw %s, not palrt::sync::sync_error\n",
                 typeid(e).name());
    status = 1;
  }
  if (!finalizer.stop()) status = fail("the finalizer thread did not stop");
  collector.collect();
  return status;
}

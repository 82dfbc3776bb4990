// SPDX-License-Identifier: MIT
//   palrt-test-copies-host [MODULE...]
// Linked against libpalrt.so. dlopen()s each MODULE (RTLD_LOCAL, as CPython loads extension
// modules) and, if it exports palrt_test_module_main(), runs that; then prints
// palrt::pal::process_copies(), one path per line. Exit 2 if a module does not load, 3 if a
// module's palrt_test_module_main() returned non-zero.
#include <dlfcn.h>

#include <cstdio>

#include "palrt/pal/process_copies.hpp"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    void* module = ::dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!module) {
      std::fprintf(stderr, "copies-host: %s\n", ::dlerror());
      return 2;
    }
    if (auto run = reinterpret_cast<int (*)()>(::dlsym(module, "palrt_test_module_main")); run && run() != 0) {
      std::fprintf(stderr, "copies-host: %s: palrt_test_module_main() failed\n", argv[i]);
      return 3;
    }
  }
  for (const auto& path : palrt::pal::process_copies()) std::printf("%s\n", path.c_str());
  return 0;
}

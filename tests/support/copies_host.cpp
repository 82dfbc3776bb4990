// SPDX-License-Identifier: MIT
//   palrt-test-copies-host [MODULE...]
// Linked against libpalrt.so. dlopen()s each MODULE (RTLD_LOCAL, as CPython loads extension
// modules), then prints palrt::pal::process_copies(), one path per line. Exit 2 if a module
// does not load.
#include <dlfcn.h>

#include <cstdio>

#include "palrt/pal/process_copies.hpp"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!::dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
      std::fprintf(stderr, "copies-host: %s\n", ::dlerror());
      return 2;
    }
  }
  for (const auto& path : palrt::pal::process_copies()) std::printf("%s\n", path.c_str());
  return 0;
}

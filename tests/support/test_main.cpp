// SPDX-License-Identifier: MIT
// doctest's main, plus the fresh-process dispatch (see subprocess.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

namespace palrt::testing {
bool dispatch_fresh_process(int argc, char** argv, int* exit_code);
}

int main(int argc, char** argv) {
  int exit_code = 0;
  if (palrt::testing::dispatch_fresh_process(argc, argv, &exit_code)) return exit_code;
  doctest::Context context(argc, argv);
  return context.run();
}

// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Iteration counts and time budgets of the suite, as tests/support/scale.hpp has them for the
 * C++ suites: the default run is sized for CI on 2 cores; the slow suite sets
 * PALRT_TEST_SCALE=N and multiplies both by N.
 */
final class Scale {
  private Scale() {}

  static final int FACTOR = factor();

  private static int factor() {
    String s = System.getenv("PALRT_TEST_SCALE");
    try {
      int n = s == null ? 1 : Integer.parseInt(s.trim());
      return Math.max(n, 1);
    } catch (NumberFormatException e) {
      return 1;
    }
  }
}

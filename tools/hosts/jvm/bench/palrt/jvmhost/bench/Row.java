// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.util.Locale;

/**
 * One result row, printed as one JSON object on one line in palrt-bench's shape (case,
 * variant, threads, metric, value), which tools/hosts/hosts_report.py gathers. `detail`
 * carries what a reader needs to judge the figure (repetitions, collections during the timed
 * part); the report ignores it. Every string printed is one of this benchmark's own names, so
 * nothing needs escaping.
 */
final class Row {
  private Row() {}

  static void print(String benchCase, String variant, int threads, String metric, double value, String detail) {
    if (!Double.isFinite(value)) throw new IllegalStateException(benchCase + " " + metric + ": not a number: " + value);
    System.out.printf(Locale.ROOT,
        "{\"case\": \"%s\", \"variant\": \"%s\", \"threads\": %d, \"metric\": \"%s\", \"value\": %.4f, \"detail\": {%s}}%n",
        benchCase, variant, threads, metric, value, detail);
  }
}

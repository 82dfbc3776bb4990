// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.util.Arrays;

import palrt.jvmhost.Wrapper;

/**
 * The steps a round of wrappers goes through in the churn and bytes cases: make the wrappers
 * of a set of objects, drop them, collect, and wait until the variant's cleanups have run.
 */
final class WrapperRounds {
  // A full collection and a cleaner's pass over a thousand wrappers take milliseconds; ten
  // seconds without an entry gone means a wrapper is still reachable or its cleanup never runs.
  private static final long CLEANUP_TIMEOUT_NS = 10_000_000_000L;

  private WrapperRounds() {}

  /** into[k] = the wrapper of object order[k]. */
  static void makeAll(Variant variant, long handle, int[] order, Wrapper[] into) {
    for (int k = 0; k < order.length; k++) into[k] = variant.at(handle, order[k]);
  }

  /**
   * Drops every wrapper of {@code held} and runs a full collection (G1 serves System.gc()
   * with a stop-the-world full collection unless -XX:+ExplicitGCInvokesConcurrent), after
   * which none of them is reachable: their weak references are cleared and their cleanups
   * are queued.
   */
  static void dropAndCollect(Wrapper[] held) {
    Arrays.fill(held, null);
    System.gc();
  }

  /**
   * The end of a case: drops the wrappers, collects and waits for their cleanups, after which
   * their objects may be destroyed (NativeObjects: no wrapper may outlive its object). This
   * also checks, once more, that every wrapper's cleanup runs.
   */
  static void release(Variant variant, Wrapper[] held, String what) {
    dropAndCollect(held);
    awaitCleanedUp(variant, what);
  }

  /**
   * Returns once the variant holds no weak reference (Variant.heldReferences): every cleanup
   * queued by the last collection has run to its end. Polls, pausing about a microsecond
   * between polls, rather than sleeping: a sleep's wake-up (tens of microseconds) would be a
   * large part of a thousand wrappers' cleanup.
   */
  static void awaitCleanedUp(Variant variant, String what) {
    final long started = System.nanoTime();
    long left;
    while ((left = variant.heldReferences()) != 0) {
      if (System.nanoTime() - started > CLEANUP_TIMEOUT_NS)
        throw new IllegalStateException(what + ": " + left + " weak references left " + CLEANUP_TIMEOUT_NS / 1_000_000_000L
            + " s after a full collection: a wrapper is still reachable or its cleanup did not run");
      for (int spin = 0; spin < 32; spin++) Thread.onSpinWait();
    }
  }
}

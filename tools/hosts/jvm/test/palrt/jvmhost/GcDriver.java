// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Drives the collector until the binding's cleanup thread reached a point: each loop is a
 * System.gc(), some garbage (so that young collections run too, under collectors that treat
 * System.gc() as a hint), and a bounded wait on the event the cleanup thread signals. Never a
 * sleep to order events; the deadline is only the failure of a wait that should have ended,
 * and generous (30 s, times PALRT_TEST_SCALE) for a busy 2-CPU machine.
 */
final class GcDriver {
  private GcDriver() {}

  static final long TIMEOUT_MILLIS = 30_000L * Scale.FACTOR;
  private static final long SLICE_MILLIS = 50;
  // Where the garbage goes: kept for one loop, so that it is not all dead at allocation.
  private static volatile Object garbage;

  /** Young-generation churn: a few megabytes of short-lived arrays. */
  static void pressure() {
    Object[] chunk = new Object[256];
    for (int i = 0; i < chunk.length; ++i) {
      chunk[i] = new byte[16 * 1024];
    }
    garbage = chunk;
  }

  /**
   * Collects until the cleanup thread has run and settled {@code target} cleanups in all
   * (HostProbe.cleanupsSettled()); fails, saying how many never ran, after the timeout.
   */
  static void untilSettled(long target, String what) throws InterruptedException {
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!HostProbe.awaitSettled(target, SLICE_MILLIS)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": " + (target - HostProbe.cleanupsSettled())
            + " wrappers' cleanups never ran after " + TIMEOUT_MILLIS / 1000
            + " s of collections (lost: their entries and weak references are never removed)");
      }
      System.gc();
      pressure();
    }
  }

  /** Collects until the forget() held by the gate (HostProbe.holdForget) arrived at it. */
  static void untilForgetHeld(String what) {
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!HostProbe.awaitForgetHeld(SLICE_MILLIS)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": the held wrapper's cleanup never ran after "
            + TIMEOUT_MILLIS / 1000 + " s of collections");
      }
      System.gc();
      pressure();
    }
  }
}

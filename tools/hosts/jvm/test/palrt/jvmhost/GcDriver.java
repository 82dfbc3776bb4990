// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Drives the collector until the binding's sweeper thread reached a point: each loop is a
 * System.gc(), some garbage (so that young collections run too, under collectors that treat
 * System.gc() as a hint), and a bounded wait on the event the sweeper thread signals. Never a
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
   * Collects until the sweeper thread's sweeps removed {@code target} entries in all
   * (HostProbe.sweptByThread()); fails, saying how many were never removed, after the timeout.
   */
  static void untilRemoved(long target, String what) throws InterruptedException {
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!HostProbe.awaitRemoved(target, SLICE_MILLIS)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": " + (target - HostProbe.sweptByThread())
            + " collected wrappers' entries never removed after " + TIMEOUT_MILLIS / 1000
            + " s of collections (lost: their entries and weak references stay)");
      }
      System.gc();
      pressure();
    }
  }

  /** Collects until the sweep held by the gate (HostProbe.holdSweep) arrived at it. */
  static void untilSweepHeld(String what) {
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!HostProbe.awaitSweepHeld(SLICE_MILLIS)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": no sweep ran after " + TIMEOUT_MILLIS / 1000 + " s of collections");
      }
      System.gc();
      pressure();
    }
  }

  /** Collects until the sweeper thread ran a sweep after this call began. */
  static void untilSweptAgain(String what) throws InterruptedException {
    final long before = HostProbe.sweepsByThread();
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!HostProbe.awaitSweepsPast(before, SLICE_MILLIS)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": no sweep ran after " + TIMEOUT_MILLIS / 1000 + " s of collections");
      }
      System.gc();
      pressure();
    }
  }

  /** Collects until {@code probe} (a WeakReference to a wrapper nothing else holds) is cleared. */
  static void untilCleared(java.lang.ref.WeakReference<?> probe, String what) {
    final long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
    while (!probe.refersTo(null)) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": the dropped wrapper was not collected after " + TIMEOUT_MILLIS / 1000
            + " s of collections (something keeps it reachable)");
      }
      System.gc();
      pressure();
    }
  }
}

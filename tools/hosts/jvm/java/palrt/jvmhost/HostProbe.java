// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The suite's access to the binding's internals (package-private: nothing a user of
 * WrapperCache needs): the two gates that hold one call back (hold_gate.hpp), the sweeper
 * thread's progress, and the cache's counters.
 */
final class HostProbe {
  static {
    Binding.load();
  }

  private HostProbe() {}

  /**
   * Arms the sweep gate: the next sweep() (on the sweeper thread, or sweepNow()) waits before
   * it touches the cache until {@link #releaseSweep()}: the window between a collection and
   * its sweep, held open.
   */
  static native void holdSweep();

  /** Waits up to {@code timeoutMillis} for the held sweep() to arrive: true once it waits. */
  static native boolean awaitSweepHeld(long timeoutMillis);

  /** Lets the held sweep() go on (or disarms the gate if none arrived). */
  static native void releaseSweep();

  /**
   * Arms the make gate: the next at() that makes a wrapper for {@code pointer} waits in its
   * publish(), with the wrapper and its cleanup made but not cached, until
   * {@link #releaseMake()}. One call.
   */
  static native void holdMake(long pointer);

  /** Waits up to {@code timeoutMillis} for the held publish() to arrive: true once it waits. */
  static native boolean awaitMakeHeld(long timeoutMillis);

  /** Lets the held publish() go on (or disarms the gate if none arrived). */
  static native void releaseMake();

  /** NewWeakGlobalRef calls that succeeded: one per wrapper made (cached or not). */
  static native long weakRefsCreated();

  /** DeleteWeakGlobalRef calls made. */
  static native long weakRefsDeleted();

  /** Wrappers made by a thread that found another thread's cached when it inserted. */
  static native long racesLost();

  /** Entries whose dying wrapper (weak reference cleared) a new wrapper replaced. */
  static native long deadReplaced();

  /** Entries the sweeper thread's sweeps removed so far. */
  static long sweptByThread() {
    return WrapperSweeper.removed();
  }

  /** Sweeps the sweeper thread ran so far. */
  static long sweepsByThread() {
    return WrapperSweeper.sweeps();
  }

  /** WrapperSweeper.awaitRemoved. */
  static boolean awaitRemoved(long count, long timeoutMillis) throws InterruptedException {
    return WrapperSweeper.awaitRemoved(count, timeoutMillis);
  }

  /** WrapperSweeper.awaitSweepsPast. */
  static boolean awaitSweepsPast(long count, long timeoutMillis) throws InterruptedException {
    return WrapperSweeper.awaitSweepsPast(count, timeoutMillis);
  }

  /** A sweep on the calling thread (WrapperSweeper.sweep): entries removed. */
  static long sweepNow() {
    return WrapperSweeper.sweep();
  }
}

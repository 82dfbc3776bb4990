// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The suite's access to the binding's internals (package-private: nothing a user of
 * WrapperCache needs): the two gates that hold one call back (hold_gate.hpp), the cleanup
 * thread's progress, and the cache's counters.
 */
final class HostProbe {
  static {
    Binding.load();
  }

  private HostProbe() {}

  /**
   * Arms the forget gate: the next forget() of {@code pointer} waits on the cleanup thread,
   * before it touches the cache, until {@link #releaseForget()}. One call, one pointer.
   */
  static native void holdForget(long pointer);

  /** Waits up to {@code timeoutMillis} for the held forget() to arrive: true once it waits. */
  static native boolean awaitForgetHeld(long timeoutMillis);

  /** Lets the held forget() go on (or disarms the gate if none arrived). */
  static native void releaseForget();

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

  /** Cleanups of cached wrappers the cleanup thread ran and settled so far. */
  static long cleanupsSettled() {
    return WrapperCleanup.settled();
  }

  /** Waits up to {@code timeoutMillis} for {@code count} cleanups to have run and settled. */
  static boolean awaitSettled(long count, long timeoutMillis) throws InterruptedException {
    return WrapperCleanup.awaitSettled(count, timeoutMillis);
  }
}

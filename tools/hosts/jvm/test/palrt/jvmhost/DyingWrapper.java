// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;
import java.lang.ref.WeakReference;

/**
 * A dying wrapper: the collector cleared its weak reference, the sweep that removes its entry
 * has not run yet. The binding's sweep gate holds the sweeper back (HostProbe.holdSweep) for as
 * long as the case acts in the window:
 * <ul>
 *   <li>the entry is still there, yet {@code of()} finds nothing (no dead wrapper handed out);
 *   <li>{@code at()} makes a new wrapper, which replaces the dying one in the entry;
 *   <li>released, the sweep leaves the new entry alone (one entry, the new wrapper) and deletes
 *       the dying one's weak reference, which the insert handed it.
 * </ul>
 * Three times, on distinct natives.
 */
final class DyingWrapper {
  private static final int REPEATS = 3;

  private DyingWrapper() {}

  // In a method of its own, so that no frame keeps the wrapper reachable after it returns: a
  // Java weak reference to it tells when the collector found it unreachable.
  private static WeakReference<Wrapper> wrapAndDrop(long handle, long pointer) {
    Wrapper w = WrapperCache.at(handle, 0);
    Check.equal(pointer, w.pointer, "dying: the first wrapper's pointer");
    Check.same(w, WrapperCache.of(pointer), "dying: of() while the first wrapper lives");
    return new WeakReference<>(w);
  }

  private static void once(int repeat) throws InterruptedException {
    Check.noWrappersLeft("dying: at the start");
    final long handle = NativeObjects.create(1);
    final long pointer = NativeObjects.pointerAt(handle, 0);
    final long created0 = HostProbe.weakRefsCreated();
    final long deleted0 = HostProbe.weakRefsDeleted();
    final long replaced0 = HostProbe.deadReplaced();
    final long removed0 = HostProbe.sweptByThread();
    HostProbe.holdSweep();
    final long sweeps;
    Wrapper fresh;
    try {
      WeakReference<Wrapper> probe = wrapAndDrop(handle, pointer);
      Check.equal(1, HostProbe.weakRefsCreated() - created0, "dying: wrappers made");
      // The collector clears the cache's weak reference with the Java one (the wrapper has no
      // finalizer), and a sweep is held before it touches the cache.
      GcDriver.untilCleared(probe, "dying");
      GcDriver.untilSweepHeld("dying");
      // In the window: the weak reference is cleared, the entry is not removed yet.
      Check.equal(1, WrapperCache.entries(), "dying: entries() while the sweep is held");
      Check.same(null, WrapperCache.of(pointer), "dying: of() handed out a wrapper the collector found unreachable");
      fresh = WrapperCache.at(handle, 0);
      Check.equal(pointer, fresh.pointer, "dying: the new wrapper's pointer");
      Check.equal(2, HostProbe.weakRefsCreated() - created0, "dying: at() made a new wrapper for a dying one");
      Check.equal(1, HostProbe.deadReplaced() - replaced0, "dying: the dying entry replaced");
      Check.equal(1, WrapperCache.entries(), "dying: entries() once the new wrapper replaced the dying one");
      Check.same(fresh, WrapperCache.of(pointer), "dying: of() finds the new wrapper");
      Check.equal(2, WrapperCache.liveWeakRefs(), "dying: weak references (the dying one's and the new one's)");
      sweeps = HostProbe.sweepsByThread();
    } finally {
      HostProbe.releaseSweep(); // whatever failed above, the sweeper must not stay held
    }
    Check.that(HostProbe.awaitSweepsPast(sweeps, GcDriver.TIMEOUT_MILLIS), "dying: the released sweep did not finish");
    Check.equal(1, WrapperCache.entries(), "dying: the sweep removed the new wrapper's entry");
    Check.same(fresh, WrapperCache.at(handle, 0), "dying: at() after the sweep");
    Check.same(fresh, WrapperCache.of(pointer), "dying: of() after the sweep");
    Check.equal(2, HostProbe.weakRefsCreated() - created0, "dying: wrappers made after the sweep");
    Check.equal(1, HostProbe.weakRefsDeleted() - deleted0, "dying: the dying one's weak reference deleted");
    Check.equal(1, WrapperCache.liveWeakRefs(), "dying: the old weak reference deleted, the new one kept");
    Check.equal(0, HostProbe.sweptByThread() - removed0, "dying: entries swept (the replaced one was not the sweep's)");
    Reference.reachabilityFence(fresh); // alive through every check above, however compiled
    fresh = null;
    GcDriver.untilRemoved(removed0 + 1, "dying: the new wrapper");
    Check.noWrappersLeft("dying: both wrappers gone");
    NativeObjects.destroy(handle);
    System.out.println("dying: #" + repeat
        + ": a new wrapper replaced the dying one; the sweep left the new entry and deleted the old reference");
  }

  static void run() throws InterruptedException {
    for (int r = 1; r <= REPEATS; ++r) {
      once(r);
    }
  }
}

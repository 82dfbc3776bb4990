// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;

/**
 * A dying wrapper: the collector cleared its weak reference, its cleanup has not run yet. The
 * binding's forget gate holds that cleanup back (HostProbe.holdForget) for as long as the case
 * acts in the window:
 * <ul>
 *   <li>the entry is still there, yet {@code of()} finds nothing (no dead wrapper handed out);
 *   <li>{@code at()} makes a new wrapper, which replaces the dying one in the entry;
 *   <li>released, the old cleanup's forget() must leave the new entry alone: still one entry,
 *       still the new wrapper, and the old weak reference deleted.
 * </ul>
 * Three times, on distinct natives.
 */
final class DyingWrapper {
  private static final int REPEATS = 3;

  private DyingWrapper() {}

  // In a method of its own, so that no frame keeps the wrapper reachable after it returns.
  private static void wrapAndDrop(long handle, long pointer) {
    Wrapper w = WrapperCache.at(handle, 0);
    Check.equal(pointer, w.pointer, "dying: the first wrapper's pointer");
    Check.same(w, WrapperCache.of(pointer), "dying: of() while the first wrapper lives");
  }

  private static void once(int repeat) throws InterruptedException {
    Check.noWrappersLeft("dying: at the start");
    final long handle = NativeObjects.create(1);
    final long pointer = NativeObjects.pointerAt(handle, 0);
    final long created0 = HostProbe.weakRefsCreated();
    final long replaced0 = HostProbe.deadReplaced();
    final long settled0 = HostProbe.cleanupsSettled();

    HostProbe.holdForget(pointer);
    wrapAndDrop(handle, pointer);
    Check.equal(1, HostProbe.weakRefsCreated() - created0, "dying: wrappers made");
    GcDriver.untilForgetHeld("dying");

    // In the window: the weak reference is cleared (with the phantom reference that queued
    // the cleanup), the entry is not removed yet.
    Check.equal(1, WrapperCache.entries(), "dying: entries() while the cleanup is held");
    Check.same(null, WrapperCache.of(pointer), "dying: of() handed out a wrapper the collector found unreachable");
    Wrapper fresh = WrapperCache.at(handle, 0);
    Check.equal(pointer, fresh.pointer, "dying: the new wrapper's pointer");
    Check.equal(2, HostProbe.weakRefsCreated() - created0, "dying: at() made a new wrapper for a dying one");
    Check.equal(1, HostProbe.deadReplaced() - replaced0, "dying: the dying entry replaced");
    Check.equal(1, WrapperCache.entries(), "dying: entries() once the new wrapper replaced the dying one");
    Check.same(fresh, WrapperCache.of(pointer), "dying: of() finds the new wrapper");
    Check.equal(2, WrapperCache.liveWeakRefs(), "dying: weak references (the dying one's and the new one's)");

    HostProbe.releaseForget();
    Check.that(HostProbe.awaitSettled(settled0 + 1, GcDriver.TIMEOUT_MILLIS),
        "dying: the released cleanup did not finish");
    Check.equal(1, WrapperCache.entries(), "dying: the old cleanup removed the new wrapper's entry");
    Check.same(fresh, WrapperCache.at(handle, 0), "dying: at() after the old cleanup");
    Check.same(fresh, WrapperCache.of(pointer), "dying: of() after the old cleanup");
    Check.equal(2, HostProbe.weakRefsCreated() - created0, "dying: wrappers made after the old cleanup");
    Check.equal(1, WrapperCache.liveWeakRefs(), "dying: the old weak reference deleted, the new one kept");

    Reference.reachabilityFence(fresh); // alive through every check above, however compiled
    fresh = null;
    GcDriver.untilSettled(settled0 + 2, "dying: the new wrapper");
    Check.noWrappersLeft("dying: both wrappers cleaned");
    NativeObjects.destroy(handle);
    System.out.println("dying: #" + repeat
        + ": a new wrapper replaced the dying one; its old cleanup left the new entry alone");
  }

  static void run() throws InterruptedException {
    for (int r = 1; r <= REPEATS; ++r) {
      once(r);
    }
  }
}

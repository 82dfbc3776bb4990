// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;

/**
 * The end of the cache (WrapperCache.close(), palrt::jni::identity_cache::close()): the last
 * case of a run, since close() is for good.
 * <ul>
 *   <li>close() returns while a cleanup is held inside forget()'s gate (it waits for lookups,
 *       not for cleanups);
 *   <li>afterwards at() throws IllegalStateException, for a live wrapper's native and for a
 *       dying one's, and of() finds nothing;
 *   <li>the cleanups that run after close() still work: the held one, released, and those of
 *       the wrappers alive at close(), once dropped; each deletes its weak reference at once,
 *       once: liveWeakRefs() ends at 0 and the deletions equal the creations;
 *   <li>close() again does nothing.
 * </ul>
 */
final class ShutdownContract {
  private static final int NATIVES = 8;

  private ShutdownContract() {}

  // In a method of its own: the caller's frames keep no wrapper.
  private static Wrapper[] wrapAll(long handle) {
    Wrapper[] held = new Wrapper[NATIVES];
    for (int i = 0; i < NATIVES; ++i) {
      held[i] = WrapperCache.at(handle, i);
    }
    return held;
  }

  static void run() throws InterruptedException {
    Check.noWrappersLeft("shutdown: at the start");
    final long handle = NativeObjects.create(NATIVES);
    final long dying = NativeObjects.pointerAt(handle, NATIVES - 1);
    final long created0 = HostProbe.weakRefsCreated();
    final long deleted0 = HostProbe.weakRefsDeleted();
    final long settled0 = HostProbe.cleanupsSettled();

    Wrapper[] held = wrapAll(handle);
    HostProbe.holdForget(dying);
    held[NATIVES - 1] = null;
    GcDriver.untilForgetHeld("shutdown: the last wrapper's cleanup");

    WrapperCache.close();
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0),
        "shutdown: at() of a live wrapper's native after close()");
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, NATIVES - 1),
        "shutdown: at() of a dying wrapper's native after close()");
    Check.same(null, WrapperCache.of(held[0].pointer), "shutdown: of() of a live wrapper after close()");
    Check.equal(NATIVES, HostProbe.weakRefsCreated() - created0,
        "shutdown: weak references made (none after close())");
    Check.equal(NATIVES, WrapperCache.liveWeakRefs(),
        "shutdown: weak references after close() (alive, and the held cleanup's)");

    HostProbe.releaseForget();
    Check.that(HostProbe.awaitSettled(settled0 + 1, GcDriver.TIMEOUT_MILLIS),
        "shutdown: the cleanup held across close() did not finish");
    Check.equal(NATIVES - 1, WrapperCache.liveWeakRefs(),
        "shutdown: the cleanup held across close() deleted its weak reference");
    Check.equal(NATIVES - 1, WrapperCache.entries(), "shutdown: entries after the held cleanup");

    Reference.reachabilityFence(held); // alive through every check above, however compiled
    held = null;
    GcDriver.untilSettled(settled0 + NATIVES, "shutdown: the wrappers alive at close()");
    Check.equal(NATIVES, HostProbe.cleanupsSettled() - settled0, "shutdown: cleanups run (more: one ran twice)");
    Check.equal(NATIVES, HostProbe.weakRefsDeleted() - deleted0,
        "shutdown: weak references deleted (more: a double delete)");
    Check.noWrappersLeft("shutdown: every cleanup after close()");

    WrapperCache.close();
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0),
        "shutdown: at() after a second close()");
    NativeObjects.destroy(handle);
    System.out.println("shutdown: after close() at() throws IllegalStateException; " + NATIVES
        + " cleanups after close() (one held across it) deleted their " + NATIVES + " weak references once each");
  }
}

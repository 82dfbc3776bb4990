// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;
import java.lang.ref.WeakReference;

/**
 * The end of the cache (WrapperCache.close(), palrt::jni::identity_cache::close()): the last
 * case of a run, since close() is for good.
 * <ul>
 *   <li>with a dying wrapper (collected, its sweep held by the gate), close() sweeps a last time
 *       on its own thread: the dying entry is removed and its weak reference deleted;
 *   <li>afterwards at() throws IllegalStateException, for a live wrapper's native and for the
 *       dying one's, and of() finds nothing;
 *   <li>the held sweep, released, and the sweeps after later collections do nothing: the
 *       wrappers alive at close() keep their entries and weak references (the JVM's), none is
 *       deleted after close(), none twice;
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
    final long created0 = HostProbe.weakRefsCreated();
    final long deleted0 = HostProbe.weakRefsDeleted();
    final long removed0 = HostProbe.sweptByThread();
    Wrapper[] held = wrapAll(handle);
    final WeakReference<Wrapper> dying = new WeakReference<>(held[NATIVES - 1]);
    HostProbe.holdSweep();
    final long sweeps;
    try {
      held[NATIVES - 1] = null;
      GcDriver.untilCleared(dying, "shutdown: the last wrapper");
      GcDriver.untilSweepHeld("shutdown: the last wrapper");
      Check.equal(NATIVES, WrapperCache.entries(), "shutdown: entries before close() (the dying one unswept)");
      WrapperCache.close();
      sweeps = HostProbe.sweepsByThread();
    } finally {
      HostProbe.releaseSweep();
    }
    Check.equal(NATIVES - 1, WrapperCache.entries(), "shutdown: entries after close()'s own sweep");
    Check.equal(1, HostProbe.weakRefsDeleted() - deleted0, "shutdown: close() deleted the dying one's weak reference");
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0),
        "shutdown: at() of a live wrapper's native after close()");
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, NATIVES - 1),
        "shutdown: at() of a dying wrapper's native after close()");
    Check.same(null, WrapperCache.of(held[0].pointer), "shutdown: of() of a live wrapper after close()");
    Check.that(HostProbe.awaitSweepsPast(sweeps, GcDriver.TIMEOUT_MILLIS),
        "shutdown: the sweep held across close() did not finish");
    Check.equal(0, HostProbe.sweptByThread() - removed0, "shutdown: the sweep held across close() removed entries");
    Reference.reachabilityFence(held); // alive through every check above, however compiled
    held = null;
    GcDriver.untilSweptAgain("shutdown: the wrappers alive at close(), dropped");
    Check.equal(0, HostProbe.sweptByThread() - removed0, "shutdown: a sweep after close() removed entries");
    Check.equal(NATIVES, HostProbe.weakRefsCreated() - created0, "shutdown: weak references made (none after close())");
    Check.equal(1, HostProbe.weakRefsDeleted() - deleted0, "shutdown: weak references deleted after close()");
    Check.equal(NATIVES - 1, WrapperCache.liveWeakRefs(), "shutdown: weak references left to the JVM");
    Check.equal(NATIVES - 1, WrapperCache.entries(), "shutdown: entries left to the JVM");
    WrapperCache.close();
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0),
        "shutdown: at() after a second close()");
    Check.equal(1, HostProbe.weakRefsDeleted() - deleted0, "shutdown: weak references deleted by a second close()");
    NativeObjects.destroy(handle);
    System.out.println("shutdown: close() swept the dying wrapper; after it at() throws IllegalStateException and "
        + "sweeps do nothing; " + (NATIVES - 1) + " weak references left to the JVM, none deleted twice");
  }
}

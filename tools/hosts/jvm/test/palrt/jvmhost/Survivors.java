// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Wrappers alive when the program that embeds the JVM ends it (test_embedded_jvm.cpp): {@link
 * #keep} wraps natives and holds the wrappers; after the launcher's WrapperCache.close(),
 * {@link #afterClose} drops half of them and lets the collector and the sweeper run: the
 * sweeps do nothing after close(), and every entry and weak reference cached at close() stays
 * into DestroyJavaVM, the dying JVM's, as the adapter's contract says.
 */
final class Survivors {
  private static final int NATIVES = 64;
  private static Wrapper[] held; // the survivors; the natives are never destroyed
  private static long handle;

  private Survivors() {}

  static void keep() {
    Check.noWrappersLeft("survivors: at the start");
    handle = NativeObjects.create(NATIVES);
    held = new Wrapper[NATIVES];
    for (int i = 0; i < NATIVES; ++i) {
      held[i] = WrapperCache.at(handle, i);
    }
    Check.equal(NATIVES, WrapperCache.liveWeakRefs(), "survivors: weak references");
    System.out.println("survivors: " + NATIVES + " wrappers held into the end of the JVM");
  }

  /** After close(): returns how many weak references the JVM is left with. */
  static long afterClose() throws InterruptedException {
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0), "survivors: at() after close()");
    final long removed0 = HostProbe.sweptByThread();
    for (int i = 0; i < NATIVES / 2; ++i) {
      held[i] = null;
    }
    GcDriver.untilSweptAgain("survivors: the half dropped after close()");
    Check.equal(0, HostProbe.sweptByThread() - removed0, "survivors: a sweep after close() removed entries");
    Check.equal(NATIVES, WrapperCache.liveWeakRefs(), "survivors: weak references after close()");
    System.out.println("survivors: " + NATIVES / 2 + " dropped after close(), none swept; " + NATIVES
        + " weak references left to DestroyJavaVM");
    return NATIVES;
  }
}

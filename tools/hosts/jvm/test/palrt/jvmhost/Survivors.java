// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * Wrappers alive when the program that embeds the JVM ends it (test_embedded_jvm.cpp): {@link
 * #keep} wraps natives and holds the wrappers; after the launcher's WrapperCache.close(),
 * {@link #afterClose} drops half of them and waits for their cleanups (which delete at once,
 * after close()), and the rest stay alive into DestroyJavaVM: their weak references belong to
 * the dying JVM, as the adapter's contract says.
 */
final class Survivors {
  private static final int NATIVES = 64;
  private static Wrapper[] held; // the survivors; the natives are never destroyed
  private static long handle;
  private static long settledAtKeep;

  private Survivors() {}

  static void keep() {
    Check.noWrappersLeft("survivors: at the start");
    handle = NativeObjects.create(NATIVES);
    settledAtKeep = HostProbe.cleanupsSettled();
    held = new Wrapper[NATIVES];
    for (int i = 0; i < NATIVES; ++i) {
      held[i] = WrapperCache.at(handle, i);
    }
    Check.equal(NATIVES, WrapperCache.liveWeakRefs(), "survivors: weak references");
    System.out.println("survivors: " + NATIVES + " wrappers held into the end of the JVM");
  }

  /** After close(): returns how many wrappers stay alive (their weak references are the JVM's). */
  static long afterClose() throws InterruptedException {
    Check.throwsA(IllegalStateException.class, () -> WrapperCache.at(handle, 0), "survivors: at() after close()");
    for (int i = 0; i < NATIVES / 2; ++i) {
      held[i] = null;
    }
    GcDriver.untilSettled(settledAtKeep + NATIVES / 2, "survivors: the half dropped after close()");
    Check.equal(NATIVES / 2, HostProbe.cleanupsSettled() - settledAtKeep, "survivors: cleanups after close()");
    long alive = NATIVES - NATIVES / 2;
    Check.equal(alive, WrapperCache.liveWeakRefs(), "survivors: weak references of the wrappers still alive");
    System.out.println("survivors: " + NATIVES / 2 + " dropped after close() and cleaned; " + alive
        + " alive into DestroyJavaVM");
    return alive;
  }
}

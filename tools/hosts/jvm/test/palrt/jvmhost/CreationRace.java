// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A creation race, held open: a thread's at() misses and makes a wrapper, and the make gate
 * (HostProbe.holdMake) holds it in publish(), made but not cached; meanwhile this thread's
 * at() of the same native makes and caches its own. Released, the first thread must lose:
 * publish() finds this thread's wrapper live and returns it, and caches nothing (no weak
 * reference made for the loser); its wrapper is garbage. Then the one cached wrapper is
 * collected and its entry swept once.
 * (IdentityUnderThreads meets such races by chance, some of them inside the identity cache's
 * insert, a few per run on 2 CPUs; here it happens every time.)
 */
final class CreationRace {
  private CreationRace() {}

  // In a method of its own, so that no frame keeps the wrapper reachable after it returns.
  private static void race(long handle, long pointer) throws InterruptedException {
    final long created0 = HostProbe.weakRefsCreated();
    final long deleted0 = HostProbe.weakRefsDeleted();
    AtomicReference<Object> loser = new AtomicReference<>();
    HostProbe.holdMake(pointer);
    Thread slow = new Thread(() -> {
      try {
        loser.set(WrapperCache.at(handle, 0));
      } catch (Throwable t) {
        loser.set(t);
      }
    }, "creation-race");
    slow.start();
    final boolean held = HostProbe.awaitMakeHeld(GcDriver.TIMEOUT_MILLIS);
    Wrapper winner = null;
    try {
      Check.that(held, "race: the first at() never reached publish()");
      winner = WrapperCache.at(handle, 0);
      // The held thread made its wrapper, but its weak reference would come with its insert.
      Check.equal(1, HostProbe.weakRefsCreated() - created0,
          "race: weak references made while the other publish() is held");
      Check.equal(1, WrapperCache.entries(), "race: entries() with the held wrapper not cached");
      Check.same(winner, WrapperCache.of(pointer), "race: of() while the other thread is held");
    } finally {
      HostProbe.releaseMake(); // whatever failed above, the other thread must not stay held
    }
    slow.join(GcDriver.TIMEOUT_MILLIS);
    Check.that(!slow.isAlive(), "race: the released at() did not return");
    if (loser.get() instanceof Throwable t) {
      throw new AssertionError("race: the held at() threw", t);
    }
    Check.same(winner, loser.get(), "race: the thread that lost the race got another wrapper");
    Check.equal(1, HostProbe.weakRefsCreated() - created0, "race: weak references made (the winner's only)");
    Check.equal(0, HostProbe.weakRefsDeleted() - deleted0, "race: weak references deleted");
    Check.equal(1, WrapperCache.liveWeakRefs(), "race: weak references (the winner's)");
    Check.equal(1, WrapperCache.entries(), "race: entries()");
    Reference.reachabilityFence(winner); // alive through every check above, however compiled
  }

  static void run() throws InterruptedException {
    Check.noWrappersLeft("race: at the start");
    final long handle = NativeObjects.create(1);
    final long pointer = NativeObjects.pointerAt(handle, 0);
    final long removed0 = HostProbe.sweptByThread();
    race(handle, pointer);
    GcDriver.untilRemoved(removed0 + 1, "race: the winner");
    Check.equal(1, HostProbe.sweptByThread() - removed0, "race: entries swept (the winner's)");
    Check.noWrappersLeft("race: the winner collected and cleaned");
    NativeObjects.destroy(handle);
    System.out.println("race: the held publish() lost to a wrapper cached meanwhile and returned it; one entry swept");
  }
}

// SPDX-License-Identifier: MIT
package palrt.jvmhost;

import java.lang.ref.Reference;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

/**
 * Wrappers are removed from the cache after the collector found them unreachable: hold
 * 20,000 wrappers, drop them all, collect until the sweeper thread removed their entries, and
 * the cache must be back to no entry and no JNI weak reference (none leaked, none deleted
 * twice); a native whose wrapper was collected gets a new one.
 */
final class RemovedAfterCollection {
  private static final int NATIVES = 20_000;

  private RemovedAfterCollection() {}

  // In a method of its own, so that no frame of the caller keeps a wrapper reachable.
  private static void holdAndDrop(long handle) {
    Wrapper[] held = new Wrapper[NATIVES];
    Set<Wrapper> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    for (int i = 0; i < NATIVES; ++i) {
      held[i] = WrapperCache.at(handle, i);
      distinct.add(held[i]);
    }
    Check.equal(NATIVES, distinct.size(), "collection: distinct wrappers for distinct natives");
    for (int i = 0; i < NATIVES; ++i) {
      Check.same(held[i], WrapperCache.at(handle, i), "collection: the wrapper of native " + i + " while held");
    }
    Check.equal(NATIVES, WrapperCache.entries(), "collection: entries() while every wrapper is held");
    Check.equal(NATIVES, WrapperCache.liveWeakRefs(), "collection: liveWeakRefs() while every wrapper is held");
    Reference.reachabilityFence(held); // alive through every check above, however compiled
  }

  static void run() throws InterruptedException {
    Check.noWrappersLeft("collection: at the start");
    final long handle = NativeObjects.create(NATIVES);
    final long created0 = HostProbe.weakRefsCreated();
    final long deleted0 = HostProbe.weakRefsDeleted();
    final long removed0 = HostProbe.sweptByThread();

    holdAndDrop(handle);
    Check.equal(NATIVES, HostProbe.weakRefsCreated() - created0, "collection: weak references made");
    GcDriver.untilRemoved(removed0 + NATIVES, "collection: after dropping " + NATIVES + " wrappers");
    Check.equal(NATIVES, HostProbe.sweptByThread() - removed0, "collection: entries swept (more: one swept twice)");
    Check.equal(NATIVES, HostProbe.weakRefsDeleted() - deleted0, "collection: weak references deleted");
    Check.noWrappersLeft("collection: every wrapper collected and cleaned");

    // The native is the same; its wrapper is new (the old one is gone, nothing to compare
    // with but the count of wrappers made).
    final long createdBefore = HostProbe.weakRefsCreated();
    Check.same(null, WrapperCache.of(NativeObjects.pointerAt(handle, 0)),
        "collection: of() after the wrapper was collected");
    Check.that(WrapperCache.at(handle, 0).pointer == NativeObjects.pointerAt(handle, 0),
        "collection: a new wrapper wraps its native");
    Check.equal(1, HostProbe.weakRefsCreated() - createdBefore, "collection: a new wrapper made for a collected one");
    GcDriver.untilRemoved(removed0 + NATIVES + 1, "collection: the new wrapper");
    Check.noWrappersLeft("collection: the new wrapper collected and cleaned");
    NativeObjects.destroy(handle);
    System.out.println("collection: " + NATIVES + " wrappers collected: " + NATIVES
        + " entries swept, 0 entries and 0 weak references left; a collected wrapper's native got a new one");
  }
}

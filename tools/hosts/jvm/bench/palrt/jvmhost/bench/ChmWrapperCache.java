// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.concurrent.ConcurrentHashMap;

import palrt.jvmhost.Wrapper;

/**
 * The `chm` baseline: the identity cache a Java binding writes with no native help, the
 * pointer as the key of a {@code ConcurrentHashMap<Long, WeakReference<Wrapper>>}. The shape
 * is the one {@code WeakHashMap} and Guava's weak-valued caches use, written for concurrent
 * callers:
 *
 * <ul>
 *   <li>Hit: box the pointer, {@code get}, {@code WeakReference.get()}: lock-free, no write
 *       to shared memory (the box is thread-local, often scalar-replaced by C2).
 *   <li>Miss: first remove what the collector cleared ({@link #expungeStale}: the queue of a
 *       WeakReference subclass that carries its key), then make the wrapper and publish it
 *       with {@code putIfAbsent}. A racing thread's live wrapper wins and is returned; an
 *       entry whose wrapper was collected but not yet expunged is replaced with
 *       {@code replace(key, old, ours)}, so a stale entry can never hide a new wrapper.
 *   <li>Cleanup: {@code remove(key, deadRef)}, which removes the entry only while it still
 *       holds that very reference: a newer wrapper of the same pointer, published after the
 *       old one died, is never removed by the old one's cleanup.
 * </ul>
 *
 * Why not {@code computeIfAbsent}: it cannot see a cleared reference (the mapping is present,
 * its referent gone), and a wrapper made inside the mapping function is held only by the
 * WeakReference until the caller reads it back, so a collection in between hands out null.
 * The loop below holds the new wrapper strongly throughout. Why a ReferenceQueue rather than
 * a {@code java.lang.ref.Cleaner}: a Cleaner costs a thread and a PhantomReference plus a
 * cleaning action per wrapper on top of the WeakReference the map needs anyway, while the
 * queue reuses that WeakReference; it is what WeakHashMap and the weak-valued caches do.
 *
 * <p>The key is the boxed pointer, with Long's own hash (the two halves XORed), as users box
 * it. On malloc'd objects that is a poor hash: objects allocated together sit 32 bytes apart,
 * so the low 5 bits of their addresses are the same, and what ConcurrentHashMap's spreading
 * (h ^ h >>> 16) folds into them, address bits 16-20 (and 32 and up), is shared by objects
 * within 64 KiB of each other. The thousand objects of the hit case fall into 128 of the table's 2048
 * bins, 64 of which hold 8 or more keys and become red-black trees (TreeBin), which a lookup
 * then walks; the hundred thousand of the larger case, allocated among other allocations,
 * spread over a quarter of the bins, at most 3 per bin. That is the idiom's cost, and it is
 * measured as such.
 */
final class ChmWrapperCache {
  // Wrapper(long): the same wrapper class as the other variants', so that a hit reads the
  // same object and the bytes case weighs the same wrapper. Its constructor is the palrt
  // binding's (package-private: only the binding makes wrappers), where a pure-Java binding
  // owns its wrapper class and calls its constructor; a constant method handle is that call
  // to C2 (invokeExact on a static final handle inlines to the allocation and the
  // constructor).
  private static final MethodHandle NEW_WRAPPER;

  static {
    try {
      NEW_WRAPPER = MethodHandles.privateLookupIn(Wrapper.class, MethodHandles.lookup())
          .findConstructor(Wrapper.class, MethodType.methodType(void.class, long.class));
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** The map's value: the wrapper, weakly, and the key to remove when it was collected. */
  private static final class Ref extends WeakReference<Wrapper> {
    // The map's own key object: removing by it allocates no second box.
    final Long key;

    Ref(Wrapper referent, Long key, ReferenceQueue<Wrapper> queue) {
      super(referent, queue);
      this.key = key;
    }
  }

  private final ConcurrentHashMap<Long, Ref> map = new ConcurrentHashMap<>();
  private final ReferenceQueue<Wrapper> collected = new ReferenceQueue<>();

  /** The wrapper of {@code pointer}: the cached one while it lives, otherwise a new one. */
  Wrapper of(long pointer) {
    Ref ref = map.get(pointer);
    if (ref != null) {
      Wrapper cached = ref.get();
      if (cached != null) return cached;
    }
    return miss(pointer);
  }

  private Wrapper miss(long pointer) {
    expungeStale();
    Long key = pointer;
    Wrapper made = newWrapper(pointer);  // held strongly until returned: see the class comment
    Ref ref = new Ref(made, key, collected);
    for (;;) {
      Ref old = map.putIfAbsent(key, ref);
      if (old == null) return made;
      Wrapper winner = old.get();
      // Another thread published a live wrapper first: it is the identity's wrapper. Ours
      // and its Ref become garbage together, and an unreachable Reference is never enqueued.
      if (winner != null) return winner;
      // The cached wrapper was collected and its entry not expunged yet: take its place. Its
      // own cleanup later finds our Ref in the map and leaves it.
      if (map.replace(key, old, ref)) return made;
      // Someone replaced or removed `old` meanwhile: look again.
    }
  }

  private static Wrapper newWrapper(long pointer) {
    try {
      return (Wrapper) NEW_WRAPPER.invokeExact(pointer);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {  // Wrapper's constructor declares no checked exception
      throw new AssertionError(t);
    }
  }

  /** Removes the entries whose wrapper the collector cleared (the miss path's first step). */
  void expungeStale() {
    for (Reference<? extends Wrapper> r; (r = collected.poll()) != null; ) {
      Ref dead = (Ref) r;
      map.remove(dead.key, dead);
    }
  }

  /** Entries, the cleared ones not yet expunged included. */
  long entries() {
    return map.mappingCount();
  }
}

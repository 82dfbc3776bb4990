// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The Java object of one native object: while it is reachable, {@link WrapperCache#at} and
 * {@link WrapperCache#of} return this very object for its native pointer, on every thread, so
 * {@code ==} (and the identity {@code equals}/{@code hashCode} it inherits) compare native
 * objects.
 *
 * <p>Only the binding makes wrappers (WrapperCache.at(), when no live one is cached), and a
 * wrapper carries nothing for the cache: the cache holds it weakly, and {@link WrapperSweeper}
 * removes its entry after the collector cleared it.
 */
public final class Wrapper {
  /** The native object's address (NativeObjects.pointerAt). */
  public final long pointer;

  Wrapper(long pointer) {
    this.pointer = pointer;
  }

  @Override
  public String toString() {
    return "Wrapper[0x" + Long.toHexString(pointer) + "]";
  }
}

// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The suite's assertions: each failure says what was expected and what was seen (Java's
 * {@code assert} would need -ea, and a test must not pass because its checks were off).
 */
final class Check {
  private Check() {}

  static void that(boolean condition, String what) {
    if (!condition) {
      throw new AssertionError(what);
    }
  }

  static void equal(long expected, long actual, String what) {
    if (expected != actual) {
      throw new AssertionError(what + ": expected " + expected + ", got " + actual);
    }
  }

  static void same(Object expected, Object actual, String what) {
    if (expected != actual) {
      throw new AssertionError(what + ": expected " + expected + ", got " + actual);
    }
  }

  /** Runs {@code call} and checks that it throws {@code type}. */
  static void throwsA(Class<? extends Throwable> type, Runnable call, String what) {
    try {
      call.run();
    } catch (Throwable t) {
      if (type.isInstance(t)) {
        return;
      }
      throw new AssertionError(what + ": expected " + type.getName() + ", got " + t, t);
    }
    throw new AssertionError(what + ": expected " + type.getName() + ", nothing was thrown");
  }

  /** The cache is empty: every wrapper of the cases before was collected and cleaned. */
  static void noWrappersLeft(String when) {
    equal(0, WrapperCache.entries(), when + ": entries()");
    equal(0, WrapperCache.liveWeakRefs(), when + ": liveWeakRefs() (JNI weak references not deleted)");
  }
}

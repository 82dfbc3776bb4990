// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.Arrays;

/**
 * The JVM host's benchmark: palrt's identity cache behind a JNI binding
 * ({@code palrt.jvmhost.WrapperCache}) against the two caches a binding writes without palrt,
 * a {@code ConcurrentHashMap} of weak references in Java ({@link ChmWrapperCache}) and a
 * {@code std::unordered_map} of JNI weak global references under a {@code std::mutex}
 * ({@link MutexMapWrapperCache}); in the churn case also the floor under any binding that holds
 * wrappers through JNI weak global references, the reference and its cleanup with no map
 * ({@link JniWeakFloor}). One case and one variant per JVM, so that each variant's code is
 * compiled for it alone and starts from a fresh heap; prints one JSON row per figure
 * ({@link Row}). tools/hosts/jvm/bench/bench_jvm.py runs every case and variant, rotated, and
 * takes the medians.
 *
 * <p>Cases (what one operation is, exactly, is in each class's comment):
 * <ul>
 *   <li>{@code hit} ({@link HitBench}): every wrapper alive, random objects; ns per lookup as
 *       wall time over all threads' lookups, so two threads that scale halve it.
 *   <li>{@code churn} ({@link ChurnBench}): every lookup a miss whose previous wrapper was
 *       collected; ns per wrapper made, its cleanup included.
 *   <li>{@code bytes} ({@link BytesBench}): bytes per live cached wrapper, Java heap plus
 *       malloc'd native memory.
 * </ul>
 */
public final class JvmBench {
  private JvmBench() {}

  public static void main(String[] args) throws Exception {
    Options o;
    try {
      o = Options.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println("JvmBench: " + e.getMessage());
      System.err.println(Options.USAGE);
      System.exit(2);
      return;
    }
    switch (o.benchCase) {
      case "hit": HitBench.run(o); break;
      case "churn": ChurnBench.run(o); break;
      case "bytes": BytesBench.run(o); break;
      default: throw new AssertionError(o.benchCase);  // Options.parse checked it
    }
    // The cleaner threads are daemons; nothing else keeps the JVM.
    System.out.flush();
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int mid = sorted.length / 2;
    return sorted.length % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }

  /** Collections so far, by every collector (G1: young, mixed and full pauses). */
  static long collections() {
    long count = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans())
      count += Math.max(0, gc.getCollectionCount());
    return count;
  }
}

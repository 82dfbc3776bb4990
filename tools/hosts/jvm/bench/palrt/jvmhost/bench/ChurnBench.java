// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

import palrt.jvmhost.NativeObjects;
import palrt.jvmhost.Wrapper;

/**
 * The {@code churn} case: N native objects whose wrappers are made, dropped, collected and
 * cleaned up, round after round, so that every lookup is a miss for an object whose previous
 * wrapper died.
 *
 * <p>One round, on one thread, the same steps for every variant:
 * <ol>
 *   <li>(timed) get the wrapper of each of the N objects, in a random order drawn once, and
 *       hold it in an array: N misses, N new wrappers, each with its weak reference and, for
 *       mutex-map and jni-weak-floor, its cleanup (a PhantomReference) registered;
 *   <li>(untimed) check that the variant holds N entries, drop the array, System.gc(): a full
 *       stop-the-world collection, milliseconds, which would drown the rest; most of it is the
 *       same work for every variant (the collector's share that differs, clearing and
 *       queueing the variant's references, is left out with it);
 *   <li>(timed) wait until the variant holds no weak reference: every collected wrapper's
 *       removal has run to its end. palrt: the binding's sweeper thread, woken by the
 *       collection, swept the table and deleted the weak global references after a grace
 *       period. mutex-map: its cleanup thread ran each wrapper's native forget.
 *       jni-weak-floor (no map: JniWeakFloor.java): its cleanup thread deleted each weak
 *       global reference, a batch per native call. chm: its
 *       reference queue is drained, the work its miss path does first (done here, polling as
 *       that miss path would, so that its round ends as clean as the others'). Every
 *       variant's wait includes the JDK's reference handler thread handing the cleared
 *       references over.
 * </ol>
 * Reported: {@code ns_per_op} = the timed part of a round / N, ns per wrapper made and cleaned
 * up, the median of the timed rounds (untimed rounds for at least --warmup-ms first: C2).
 * Beside it (the row's detail): the median of each part alone, {@code make_ns_per_op} (step 1)
 * and {@code cleanup_ns_per_op} (step 3), and {@code background_cpu_ns_per_op}: the CPU time
 * the JVM's and the variant's own background threads took over the timed rounds, per wrapper
 * (the JDK's reference handler, and palrt's sweeper or a cleanup thread). A background thread
 * may start on step 3's work while System.gc() is still returning (step 2, untimed), which the
 * wall figure then does not see, and which this one does.
 */
final class ChurnBench {
  private ChurnBench() {}

  static void run(Options o) {
    final Variant variant = Variant.named(o.variant);
    final long handle = NativeObjects.create(o.n);
    int[] order = permutation(o.n, new SplittableRandom(o.seed));
    Wrapper[] held = new Wrapper[o.n];
    final long until = System.nanoTime() + o.warmupMs * 1_000_000L;
    long[] parts = new long[2];
    for (int round = 0; round < 10 || System.nanoTime() - until < 0; round++) churn(variant, handle, order, held, o, parts);
    final List<Long> background = backgroundThreads();
    final long backgroundCpu0 = cpuTime(background);
    double[] nsPerOp = new double[o.iterations];
    double[] makeNs = new double[o.iterations];
    double[] cleanupNs = new double[o.iterations];
    for (int round = 0; round < o.iterations; round++) {
      churn(variant, handle, order, held, o, parts);
      makeNs[round] = (double) parts[0] / o.n;
      cleanupNs[round] = (double) parts[1] / o.n;
      nsPerOp[round] = makeNs[round] + cleanupNs[round];
    }
    final double backgroundNs = (double) (cpuTime(background) - backgroundCpu0) / ((long) o.iterations * o.n);
    NativeObjects.destroy(handle);  // the last round's cleanups ran: no wrapper is left
    Row.print("jvm/churn/N=" + o.n, o.variant, 1, "ns_per_op", JvmBench.median(nsPerOp),
        String.format(Locale.ROOT,
            "\"rounds\": %d, \"make_ns_per_op\": %.4f, \"cleanup_ns_per_op\": %.4f, \"background_cpu_ns_per_op\": %.4f",
            o.iterations, JvmBench.median(makeNs), JvmBench.median(cleanupNs), backgroundNs));
  }

  /** One round (see the class comment): its two timed parts, in ns, into parts[0] and parts[1]. */
  private static void churn(Variant variant, long handle, int[] order, Wrapper[] held, Options o, long[] parts) {
    long t0 = System.nanoTime();
    WrapperRounds.makeAll(variant, handle, order, held);
    long t1 = System.nanoTime();
    long entries = variant.entries();
    if (entries != o.n)
      throw new IllegalStateException(o.variant + ": " + entries + " entries after making " + o.n + " wrappers");
    WrapperRounds.dropAndCollect(held);
    long t2 = System.nanoTime();
    WrapperRounds.awaitCleanedUp(variant, o.variant);
    long t3 = System.nanoTime();
    parts[0] = t1 - t0;
    parts[1] = t3 - t2;
  }

  // The threads whose CPU time is background_cpu_ns_per_op: the reference handler and the
  // variant's own (palrt-jvmhost-sweeper, jvmbench-*-cleanup), started by the warm-up rounds.
  private static List<Long> backgroundThreads() {
    List<Long> ids = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      String name = t.getName();
      if (name.equals("Reference Handler") || name.startsWith("palrt-jvmhost-") || name.startsWith("jvmbench-"))
        ids.add(t.getId());
    }
    return ids;
  }

  private static long cpuTime(List<Long> ids) {
    ThreadMXBean times = ManagementFactory.getThreadMXBean();
    long sum = 0;
    for (long id : ids) sum += Math.max(0, times.getThreadCpuTime(id));  // -1: ended
    return sum;
  }

  private static int[] permutation(int n, SplittableRandom random) {
    int[] order = new int[n];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {  // Fisher-Yates
      int j = random.nextInt(i + 1);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    return order;
  }
}

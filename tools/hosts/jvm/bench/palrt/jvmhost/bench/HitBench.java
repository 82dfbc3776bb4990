// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.util.Locale;
import java.util.SplittableRandom;

import palrt.jvmhost.NativeObjects;
import palrt.jvmhost.Wrapper;

/**
 * The {@code hit} case: N native objects, every one's wrapper alive (made before the timed
 * part and held in a Java array), T threads each looking objects up in a random order of its
 * own, drawn before the timed part (no random number generator in the loop).
 *
 * <p>One operation: {@code variant.at(handle, i)} for the next precomputed i, and a read of
 * the returned wrapper's {@code pointer} (a caller uses the wrapper it asked for: the read
 * pays for the wrapper's cache line, every variant alike, and the sum of the pointers read is
 * checked, so a lookup that returned the wrong wrapper fails the run).
 *
 * <p>Reported: {@code ns_per_op} = a repetition's wall time (the earliest thread's start to
 * the latest thread's end) divided by the operations of all threads together, the median of
 * the timed repetitions. That is inverse throughput: two threads that scale perfectly halve
 * it. Beside it (the row's detail, not a row): {@code cpu_ns_per_op}, the workers' CPU time
 * over the same operations, which is {@code threads} times ns_per_op when no worker waited for
 * a CPU and more when other processes held them. Before the timed repetitions the team runs untimed ones for at least --warmup-ms (C2
 * compiles the loop and the variant's code; this also sizes a repetition to about --rep-ms).
 */
final class HitBench {
  private HitBench() {}

  static void run(Options o) throws InterruptedException {
    final Variant variant = Variant.named(o.variant);
    final long handle = NativeObjects.create(o.n);
    long[] pointers = new long[o.n];
    Wrapper[] held = new Wrapper[o.n];
    for (int i = 0; i < o.n; i++) {
      pointers[i] = NativeObjects.pointerAt(handle, i);
      held[i] = variant.at(handle, i);
    }
    for (int i = 0; i < o.n; i++) {
      if (held[i].pointer != pointers[i])
        throw new IllegalStateException(o.variant + ": the wrapper of object " + i + " wraps another object");
      if (variant.at(handle, i) != held[i])
        throw new IllegalStateException(o.variant + ": object " + i + " got a second wrapper while its first was alive");
    }
    if (variant.entries() != o.n)
      throw new IllegalStateException(o.variant + ": " + variant.entries() + " entries for " + o.n + " wrappers");

    final int[][] indices = new int[o.threads][];
    for (int w = 0; w < o.threads; w++) indices[w] = randomIndices(o.n, new SplittableRandom(o.seed * 1_000_003L + w));

    double[] nsPerOp = new double[o.iterations];
    double[] cpuNsPerOp = new double[o.iterations];
    long collections;
    int ops;
    try (Team team = new Team(o.threads, (w, n) -> lookups(variant, handle, indices[w], n))) {
      ops = warmUp(team, o);
      long[] expected = new long[o.threads];
      for (int w = 0; w < o.threads; w++) expected[w] = expectedSum(pointers, indices[w], ops);
      long collectionsBefore = JvmBench.collections();
      for (int r = 0; r < o.iterations; r++) {
        long wall = team.run(ops);
        nsPerOp[r] = (double) wall / ((double) ops * o.threads);
        cpuNsPerOp[r] = (double) team.cpuTime() / ((double) ops * o.threads);
        for (int w = 0; w < o.threads; w++)
          if (team.checksum(w) != expected[w])
            throw new IllegalStateException(o.variant + ": thread " + w + " read wrappers of the wrong objects");
      }
      collections = JvmBench.collections() - collectionsBefore;
    }
    // Every wrapper was alive until the last lookup: `held` is used here, after the team ended.
    // (On a failure the exception ends the JVM instead: the objects are not destroyed under
    // wrappers that may still be alive, which NativeObjects forbids.)
    WrapperRounds.release(variant, held, o.variant);
    NativeObjects.destroy(handle);
    Row.print("jvm/hit/N=" + o.n, o.variant, o.threads, "ns_per_op", JvmBench.median(nsPerOp),
        String.format(Locale.ROOT, "\"repetitions\": %d, \"ops_per_thread\": %d, \"collections\": %d, \"cpu_ns_per_op\": %.4f",
            o.iterations, ops, collections, JvmBench.median(cpuNsPerOp)));
  }

  /** The timed loop: one operation per index (see the class comment); returns the checksum. */
  static long lookups(Variant variant, long handle, int[] indices, int ops) {
    final int mask = indices.length - 1;
    long sum = 0;
    for (int k = 0; k < ops; k++) sum += variant.at(handle, indices[k & mask]).pointer;
    return sum;
  }

  /**
   * Untimed repetitions for at least --warmup-ms and at least 5, then the operations per
   * thread that make a repetition last about --rep-ms at the fastest rate the warm-up saw (a
   * repetition stretched by a collection or a descheduling must not shorten the timed ones).
   * The first repetitions run interpreted and compiled by C1, so only the second half of the
   * warm-up counts.
   */
  private static int warmUp(Team team, Options o) throws InterruptedException {
    final long target = o.repMs * 1_000_000L;
    final long started = System.nanoTime();
    final long until = started + o.warmupMs * 1_000_000L;
    final long secondHalf = started + o.warmupMs * 500_000L;
    int ops = 1 << 14;
    double fastest = Double.MAX_VALUE;  // ns per operation per thread
    for (int rep = 0; rep < 5 || System.nanoTime() - until < 0; rep++) {
      boolean counts = System.nanoTime() - secondHalf >= 0;
      double perOp = (double) Math.max(team.run(ops), 1) / ops;
      if (counts) fastest = Math.min(fastest, perOp);
      double rate = counts ? fastest : perOp;
      ops = (int) Math.max(1 << 10, Math.min(1 << 26, target / rate));
    }
    return ops;
  }

  /**
   * A thread's lookup order: a power-of-two number of random indices (the loop wraps with a
   * mask), at least four per object and 64 Ki, so that the order repeats rarely.
   */
  private static int[] randomIndices(int n, SplittableRandom random) {
    int length = Integer.highestOneBit(Math.max(4 * n, 1 << 16) - 1) << 1;
    int[] indices = new int[length];
    for (int k = 0; k < length; k++) indices[k] = random.nextInt(n);
    return indices;
  }

  private static long expectedSum(long[] pointers, int[] indices, int ops) {
    final int mask = indices.length - 1;
    long sum = 0;
    for (int k = 0; k < ops; k++) sum += pointers[indices[k & mask]];
    return sum;
  }
}

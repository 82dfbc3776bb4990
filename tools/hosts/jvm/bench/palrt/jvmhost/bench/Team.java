// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;

/**
 * Worker threads started once and run in lock-step repetitions: the caller's {@link #run}
 * releases every worker through one barrier, each runs its task for {@code ops} operations
 * and reads System.nanoTime before and after, and the last one through the closing barrier
 * hands the caller the repetition's wall time: from the earliest start to the latest end.
 * The threads live as long as the team, so no repetition pays a thread's start. Each worker
 * also reads its own CPU time around its part: on a machine where other processes compete for
 * the CPUs, the repetition's wall time against its CPU time tells how long the workers waited
 * for one.
 */
final class Team implements AutoCloseable {
  /** One worker's part of a repetition: {@code ops} operations; returns a checksum. */
  interface Task {
    long run(int worker, int ops);
  }

  private final Thread[] workers;
  private final CyclicBarrier start;
  private final CyclicBarrier end;
  private final long[] began;
  private final long[] ended;
  private final long[] checksums;
  private final long[] cpuTimes;
  private final ThreadMXBean threadTimes = ManagementFactory.getThreadMXBean();
  // Written by the caller before it enters `start`, read by the workers after they leave it:
  // the barrier orders the two, so plain fields are enough.
  private int ops;
  private boolean closing;
  private volatile Throwable failure;

  Team(int threads, Task task) {
    workers = new Thread[threads];
    start = new CyclicBarrier(threads + 1);
    end = new CyclicBarrier(threads + 1);
    began = new long[threads];
    ended = new long[threads];
    checksums = new long[threads];
    cpuTimes = new long[threads];
    for (int w = 0; w < threads; w++) {
      final int worker = w;
      workers[w] = new Thread(() -> work(worker, task), "jvmbench-worker-" + w);
      workers[w].setDaemon(true);  // a failed run must not leave the JVM waiting on them
      workers[w].start();
    }
  }

  private void work(int worker, Task task) {
    try {
      for (;;) {
        start.await();
        if (closing) return;
        long cpu0 = threadTimes.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        long sum = task.run(worker, ops);
        long t1 = System.nanoTime();
        long cpu1 = threadTimes.getCurrentThreadCpuTime();
        began[worker] = t0;
        ended[worker] = t1;
        checksums[worker] = sum;
        cpuTimes[worker] = cpu1 - cpu0;
        end.await();
      }
    } catch (BrokenBarrierException | InterruptedException e) {
      // Another party failed or the team is closing: that party reports.
    } catch (Throwable t) {
      failure = t;
      start.reset();
      end.reset();  // wakes the caller with BrokenBarrierException
    }
  }

  /** One repetition of {@code opsPerWorker} operations on every worker: its wall time in ns. */
  long run(int opsPerWorker) throws InterruptedException {
    ops = opsPerWorker;
    try {
      start.await();
      end.await();
    } catch (BrokenBarrierException e) {
      throw new IllegalStateException("a worker failed", failure != null ? failure : e);
    }
    long first = Long.MAX_VALUE;
    long last = Long.MIN_VALUE;
    for (int w = 0; w < workers.length; w++) {
      first = Math.min(first, began[w]);
      last = Math.max(last, ended[w]);
    }
    return last - first;
  }

  /** The CPU time of all workers together in the last repetition, ns. */
  long cpuTime() {
    long total = 0;
    for (long t : cpuTimes) total += t;
    return total;
  }

  /** The checksum worker {@code w} returned in the last repetition. */
  long checksum(int w) {
    return checksums[w];
  }

  @Override
  public void close() {
    // After a failure a worker may still be waiting on a barrier that was reset under it; the
    // workers are daemons, so the JVM exits past them with the failure run() threw.
    if (failure != null) return;
    closing = true;
    try {
      start.await();
      for (Thread t : workers) t.join();
    } catch (BrokenBarrierException e) {
      // A worker failed meanwhile: as above.
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();  // the caller's to handle; the workers are daemons
    }
  }
}

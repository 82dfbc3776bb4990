// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The JVM host's suite: the cases named on the command line, in that order (no argument: the
 * ones a {@code java} run makes, {@code errors identity race collection dying shutdown}; shutdown closes
 * the cache for good, so it comes last). The same main runs under the {@code java} launcher
 * (meson tests jvm-host-g1, jvm-host-parallelgc) and inside a C++ program that created the JVM
 * itself (test_embedded_jvm.cpp, which ends with {@code survivors} and then closes the cache
 * and destroys the JVM). A failure is an AssertionError out of main: exit status 1 under
 * {@code java}, a pending exception for the C++ launcher.
 */
public final class HostSuite {
  private HostSuite() {}

  public static void main(String[] args) throws InterruptedException {
    String[] cases = args.length > 0
        ? args
        : new String[] {"errors", "identity", "race", "collection", "dying", "shutdown"};
    System.out.println("jvm host suite: " + System.getProperty("java.vm.name") + " "
        + System.getProperty("java.vm.version") + ", GC: " + collectorNames() + ", scale "
        + Scale.FACTOR);
    for (String c : cases) {
      final long start = System.nanoTime();
      switch (c) {
        case "errors" -> ArgumentErrors.run();
        case "identity" -> IdentityUnderThreads.run();
        case "race" -> CreationRace.run();
        case "collection" -> RemovedAfterCollection.run();
        case "dying" -> DyingWrapper.run();
        case "shutdown" -> ShutdownContract.run();
        case "survivors" -> Survivors.keep();
        default -> throw new IllegalArgumentException("jvm host suite: no case named '" + c + "'");
      }
      System.out.printf("jvm host suite: %s passed (%.1f s)%n", c, (System.nanoTime() - start) / 1e9);
    }
    System.out.println("jvm host suite: " + cases.length + " cases passed");
  }

  private static String collectorNames() {
    StringBuilder names = new StringBuilder();
    for (var gc : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
      names.append(names.length() > 0 ? ", " : "").append(gc.getName());
    }
    return names.toString();
  }
}

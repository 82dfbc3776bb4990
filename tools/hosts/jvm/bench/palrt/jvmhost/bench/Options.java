// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.util.List;

/** JvmBench's command line, checked: a bad value stops the run with a message naming it. */
final class Options {
  static final String USAGE =
      "usage: JvmBench --case hit|churn|bytes --variant palrt|chm|mutex-map|jni-weak-floor --n N\n"
          + "                [--threads T] [--iterations R] [--warmup-ms MS] [--rep-ms MS] [--seed S]\n"
          + "  --variant     jni-weak-floor: churn only (not an identity cache: it makes a wrapper per call)\n"
          + "  --threads     hit only: worker threads (1 or more); churn and bytes run on one\n"
          + "  --iterations  hit: timed repetitions; churn: timed rounds (the median is reported)\n"
          + "  --warmup-ms   untimed warm-up before the timed part, at least this long (C2 compiles)\n"
          + "  --rep-ms      hit: the length a repetition is calibrated to during the warm-up\n"
          + "  --seed        the random lookups' and the churn order's seed";

  String benchCase;
  String variant;
  int n;
  int threads = 1;
  int iterations = -1;  // per case below
  int warmupMs = 700;
  int repMs = 25;
  long seed = 1;

  static Options parse(String[] args) {
    Options o = new Options();
    for (int k = 0; k < args.length; k += 2) {
      if (k + 1 >= args.length) throw new IllegalArgumentException(args[k] + " needs a value");
      String name = args[k];
      String value = args[k + 1];
      switch (name) {
        case "--case": o.benchCase = value; break;
        case "--variant": o.variant = value; break;
        case "--n": o.n = positive(name, value); break;
        case "--threads": o.threads = positive(name, value); break;
        case "--iterations": o.iterations = positive(name, value); break;
        case "--warmup-ms": o.warmupMs = nonNegative(name, value); break;
        case "--rep-ms": o.repMs = positive(name, value); break;
        case "--seed": o.seed = Long.parseLong(value); break;
        default: throw new IllegalArgumentException("unknown option " + name);
      }
    }
    if (o.benchCase == null || o.variant == null || o.n == 0)
      throw new IllegalArgumentException("--case, --variant and --n are required");
    if (!o.benchCase.equals("hit") && o.threads != 1)
      throw new IllegalArgumentException("--threads applies to the hit case only");
    if (!Variant.NAMES.contains(o.variant))
      throw new IllegalArgumentException("unknown variant '" + o.variant + "' (" + String.join(", ", Variant.NAMES) + ")");
    if (!List.of("hit", "churn", "bytes").contains(o.benchCase))
      throw new IllegalArgumentException("unknown case '" + o.benchCase + "' (hit, churn, bytes)");
    // Every lookup of the churn case is a miss; hit and bytes need lookups that find the
    // wrapper made before, which the floor never does.
    if (o.variant.equals(Variant.FLOOR) && !o.benchCase.equals("churn"))
      throw new IllegalArgumentException("--variant " + Variant.FLOOR + " applies to the churn case only");
    if (o.iterations < 0) o.iterations = o.benchCase.equals("hit") ? 15 : 60;
    return o;
  }

  private static int positive(String name, String value) {
    int v = nonNegative(name, value);
    if (v == 0) throw new IllegalArgumentException(name + " must be at least 1");
    return v;
  }

  private static int nonNegative(String name, String value) {
    int v;
    try {
      v = Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " takes an integer (got '" + value + "')");
    }
    if (v < 0) throw new IllegalArgumentException(name + " must not be negative (got " + v + ")");
    return v;
  }
}

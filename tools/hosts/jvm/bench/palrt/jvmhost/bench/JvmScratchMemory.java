// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

import java.lang.management.ManagementFactory;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.management.JMException;
import javax.management.ObjectName;

/**
 * The malloc'd memory HotSpot uses for itself and not for any object a cache holds, from its
 * Native Memory Tracking (the JVM must run with -XX:NativeMemoryTracking=summary): the bytes
 * case subtracts its growth from malloc's, so that a C2 compilation that happens to run while
 * the wrappers are made is not counted as theirs.
 *
 * <p>Why it is needed: the first time the chm variant's map grows past the warm-up's size,
 * C2 compiles ConcurrentHashMap's resize, and the compiler's arenas (malloc'd chunks, then
 * kept in HotSpot's chunk pool for seconds) showed up as 40-200 bytes per wrapper. What is
 * counted here: every arena (the compilers' and the threads' resource areas: scratch memory,
 * never a cache's), the free chunks of the chunk pool, the compiler's and the code cache's
 * own malloc'd metadata, and NMT's own tracking (its 16-byte header on each of HotSpot's
 * mallocs). What is not, and stays in the figure: the JNI weak global references' storage
 * (NMT category Internal), the collector's own structures (GC), class metadata.
 */
final class JvmScratchMemory {
  private static final Pattern CATEGORY = Pattern.compile("^-\\s+(.+?) \\(reserved=");
  private static final Pattern MALLOC = Pattern.compile("\\(malloc=(\\d+)KB");
  private static final Pattern ARENA = Pattern.compile("\\(arena=(\\d+)KB");
  private static final Pattern TRACKING = Pattern.compile("\\(tracking overhead=(\\d+)KB");

  private JvmScratchMemory() {}

  /** The bytes described above, now (NMT's summary, to the KiB). */
  static long bytes() {
    String summary = nativeMemorySummary();
    long kib = 0;
    String category = null;
    boolean compilerSeen = false;
    for (String line : summary.split("\n")) {
      Matcher c = CATEGORY.matcher(line);
      if (c.find()) {
        category = c.group(1);
        compilerSeen |= category.equals("Compiler");
        continue;
      }
      if (category == null) continue;
      kib += sum(ARENA, line);  // any category's arenas
      switch (category) {
        case "Compiler":
        case "Code":
        case "Arena Chunk":
        case "Native Memory Tracking":
          kib += sum(MALLOC, line) + sum(TRACKING, line);
          break;
        default:
          break;
      }
    }
    // The compiler always has memory once the JVM ran a while; its absence means the format
    // changed, and the subtraction would silently be zero.
    if (!compilerSeen)
      throw new IllegalStateException("no Compiler category in the JVM's native memory summary:\n" + summary);
    return kib * 1024;
  }

  private static long sum(Pattern p, String line) {
    Matcher m = p.matcher(line);
    return m.find() ? Long.parseLong(m.group(1)) : 0;
  }

  private static String nativeMemorySummary() {
    String out;
    try {
      out = (String) ManagementFactory.getPlatformMBeanServer().invoke(
          new ObjectName("com.sun.management:type=DiagnosticCommand"), "vmNativeMemory",
          new Object[] {new String[] {"summary", "scale=KB"}}, new String[] {String[].class.getName()});
    } catch (JMException e) {
      throw new IllegalStateException("the JVM's native memory summary (jcmd VM.native_memory) failed", e);
    }
    if (!out.contains("Native Memory Tracking:"))
      throw new IllegalStateException("the bytes case needs -XX:NativeMemoryTracking=summary: " + out.strip());
    return out;
  }
}

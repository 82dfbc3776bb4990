// SPDX-License-Identifier: MIT
package palrt.jvmhost.bench;

/**
 * The process's malloc'd bytes in use, from glibc's mallinfo2(): uordblks (allocated bytes of
 * every arena, chunk headers included) plus hblkhd (chunks malloc served with mmap). It counts
 * whatever any native code of the process has malloc'd: palrt's tables (operator new), the
 * JVM's own storage of JNI weak global references (HotSpot's OopStorage blocks come from
 * malloc), a std::unordered_map's nodes and buckets. It does not count memory mapped directly
 * (the Java heap, the code cache, thread stacks): the Java heap is measured on its own, with
 * MemoryMXBean.
 */
final class NativeHeap {
  static {
    BenchLibrary.load();
  }

  private NativeHeap() {}

  static native long inUseBytes();
}

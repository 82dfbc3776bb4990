// SPDX-License-Identifier: MIT
package palrt.jvmhost;

/**
 * The control of the suite's -Xcheck:jni check (jni_misuse_control.cpp): calls a native that
 * misuses JNI in a way the JVM survives, so that check_jni_run.py --expect-warning sees the
 * warning a real misuse in the binding would print.
 */
public final class JniMisuse {
  static {
    System.loadLibrary("palrt_jvmhost_misuse");
  }

  private JniMisuse() {}

  static void nothing() {}

  private static native void callWithoutCheck();

  public static void main(String[] args) {
    callWithoutCheck();
    System.out.println("jni misuse control: the misuse ran");
  }
}

// SPDX-License-Identifier: MIT
// The control of check_jni_run.py: a JNI library with one misuse that -Xcheck:jni reports and
// survives (a JNI call made without checking whether the call before it threw), run by the
// test jvm-host-jni-check-control with --expect-warning. It passes only if the JVM printed the
// warning and the check saw it: the proof that the suite's runs would catch such a misuse in
// the binding, where -Xcheck:jni alone would only print a line and exit 0.
#include <jni.h>

extern "C" JNIEXPORT void JNICALL Java_palrt_jvmhost_JniMisuse_callWithoutCheck(JNIEnv* env, jclass self) {
  jmethodID nothing = env->GetStaticMethodID(self, "nothing", "()V");
  if (!nothing) return;
  env->CallStaticVoidMethod(self, nothing);            // may throw: ExceptionCheck belongs here
  jclass object = env->FindClass("java/lang/Object");  // the unchecked call -Xcheck:jni reports
  env->DeleteLocalRef(object);
}

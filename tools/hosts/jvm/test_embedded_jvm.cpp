// SPDX-License-Identifier: MIT
// The JVM host's suite inside a JVM that a C++ program made (JNI_CreateJavaVM), as an
// application that embeds Java does: the same Java driver (HostSuite.main) runs its cases,
// then the program ends the binding's cache and the JVM in the order the adapter's contract
// asks for (palrt/jni/identity_cache.hpp, "The end of the runtime"):
//   1. HostSuite.main(errors, identity, race, collection, dying, survivors): the last leaves 64
//      wrappers alive;
//   2. WrapperCache.close(), from this thread, while the binding's sweeper thread runs;
//   3. Survivors.afterClose(): at() throws IllegalStateException; half the survivors are
//      dropped and collected, and the sweeps after close() remove nothing;
//   4. the counters: every weak reference the cache made is deleted but those still cached
//      at close(), which the dying JVM owns;
//   5. DestroyJavaVM, with half the survivors alive and the sweeper thread (a daemon) waiting.
// The program links libjvm and not palrt: the one copy of palrt in the process is the
// binding's, loaded by the JVM.
//
// Environment (meson sets it): PALRT_JVMHOST_CLASSPATH (the two jars),
// PALRT_JVMHOST_LIBRARY_PATH (the folder of libpalrt_jvmhost.so), and optionally
// PALRT_JVMHOST_JVM_OPTIONS (more JVM options, separated by spaces).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <jni.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) FAIL("the environment variable " << name << " is not set (meson test sets it)");
  return value;
}

// True if a Java exception is pending; prints it (with its stack) and clears it.
bool describe_pending(JNIEnv* env) {
  if (!env->ExceptionCheck()) return false;
  env->ExceptionDescribe();
  return true;
}

jclass find_class(JNIEnv* env, const char* name) {
  jclass c = env->FindClass(name);  // the system class loader: no Java frame on this thread
  if (describe_pending(env) || !c) FAIL("class " << name << " not found on the class path");
  return c;
}

jmethodID static_method(JNIEnv* env, jclass c, const char* name, const char* signature) {
  jmethodID m = env->GetStaticMethodID(c, name, signature);
  if (describe_pending(env) || !m) FAIL("no static method " << name << signature);
  return m;
}

jlong call_long(JNIEnv* env, const char* class_name, const char* method) {
  jclass c = find_class(env, class_name);
  const jlong value = env->CallStaticLongMethod(c, static_method(env, c, method, "()J"));
  if (describe_pending(env)) FAIL(class_name << "." << method << "() threw");
  env->DeleteLocalRef(c);
  return value;
}

void call_void(JNIEnv* env, const char* class_name, const char* method) {
  jclass c = find_class(env, class_name);
  env->CallStaticVoidMethod(c, static_method(env, c, method, "()V"));
  if (describe_pending(env)) FAIL(class_name << "." << method << "() threw");
  env->DeleteLocalRef(c);
}

// HostSuite.main(cases): false (the exception described) if it threw.
bool run_suite(JNIEnv* env, const std::vector<const char*>& cases) {
  jclass suite = find_class(env, "palrt/jvmhost/HostSuite");
  jclass string_class = find_class(env, "java/lang/String");
  jobjectArray args = env->NewObjectArray(static_cast<jsize>(cases.size()), string_class, nullptr);
  if (describe_pending(env)) FAIL("no memory for main's arguments");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    jstring s = env->NewStringUTF(cases[i]);
    if (describe_pending(env)) FAIL("no memory for main's arguments");
    env->SetObjectArrayElement(args, static_cast<jsize>(i), s);
    env->DeleteLocalRef(s);
  }
  env->CallStaticVoidMethod(suite, static_method(env, suite, "main", "([Ljava/lang/String;)V"), args);
  const bool passed = !describe_pending(env);
  env->DeleteLocalRef(args);
  env->DeleteLocalRef(string_class);
  env->DeleteLocalRef(suite);
  return passed;
}

}  // namespace

TEST_CASE("a JVM made and destroyed by a C++ program: the suite, close() before DestroyJavaVM, the references left") {
  std::vector<std::string> options = {
      "-Djava.class.path=" + required_env("PALRT_JVMHOST_CLASSPATH"),
      "-Djava.library.path=" + required_env("PALRT_JVMHOST_LIBRARY_PATH"),
      "-Xcheck:jni",  // its warnings fail the test (check_jni_run.py)
      "-Xmx256m",
  };
  if (const char* more = std::getenv("PALRT_JVMHOST_JVM_OPTIONS")) {
    std::istringstream words(more);
    for (std::string w; words >> w;) options.push_back(w);
  }
  std::vector<JavaVMOption> jvm_options;
  for (std::string& o : options) jvm_options.push_back({o.data(), nullptr});
  JavaVMInitArgs init{};
  init.version = JNI_VERSION_1_8;
  init.nOptions = static_cast<jint>(jvm_options.size());
  init.options = jvm_options.data();
  init.ignoreUnrecognized = JNI_FALSE;
  JavaVM* vm = nullptr;
  JNIEnv* env = nullptr;
  REQUIRE(JNI_CreateJavaVM(&vm, reinterpret_cast<void**>(&env), &init) == JNI_OK);

  REQUIRE_MESSAGE(run_suite(env, {"errors", "identity", "race", "collection", "dying", "survivors"}),
                  "HostSuite.main threw (described above)");
  const jlong created_before_close = call_long(env, "palrt/jvmhost/HostProbe", "weakRefsCreated");

  call_void(env, "palrt/jvmhost/WrapperCache", "close");
  const jlong left = call_long(env, "palrt/jvmhost/Survivors", "afterClose");  // the JVM's
  CHECK(left > 0);
  const jlong created = call_long(env, "palrt/jvmhost/HostProbe", "weakRefsCreated");
  const jlong deleted = call_long(env, "palrt/jvmhost/HostProbe", "weakRefsDeleted");
  CHECK_MESSAGE(created == created_before_close, "a weak reference was made after close()");
  CHECK_MESSAGE(created - deleted == left,
                "weak references neither deleted nor owned by the JVM (leaked: > 0; deleted twice: < 0): "
                    << created - deleted - left);
  CHECK(call_long(env, "palrt/jvmhost/WrapperCache", "liveWeakRefs") == left);
  CHECK(call_long(env, "palrt/jvmhost/WrapperCache", "entries") == left);
  MESSAGE("embedded: " << created << " weak references made, " << deleted << " deleted, " << left
                       << " owned by the JVM at DestroyJavaVM");

  // The survivors' weak references and the sweeper thread (a daemon, waiting on its queue)
  // go with the JVM.
  CHECK(vm->DestroyJavaVM() == JNI_OK);
}

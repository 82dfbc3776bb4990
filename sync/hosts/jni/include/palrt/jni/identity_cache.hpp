// SPDX-License-Identifier: MIT
// palrt::jni::identity_cache: the identity cache of a native library loaded by a JVM. Native
// pointer -> the Java object that wraps it: one wrapper per native object for as long as that
// wrapper lives, so that `get(n) == get(n)` in Java on every thread, and a native object
// handed to Java twice is one Java object.
//
// The host mode of palrt's identity cache (palrt/interop/host_identity_cache.hpp) with
// host_reclamation::grace_period: Java threads call in truly in parallel and the collector
// (G1, Parallel, ...) moves objects, so native code may hold a wrapper only through a JNI
// reference. The cache holds each wrapper through a weak global reference (it must not keep
// the wrapper alive), and a hit is a read section, the probe, and one NewLocalRef of that
// weak reference: no lock, no shared write.
//
// A JVM binding author copies this. Java makes the wrappers: a hit is one JNI call (find()),
// and on a miss Java allocates the wrapper and its cleanup itself and hands them to insert()
// (JNI calls from Java into native code are far cheaper than calls from native code into the
// JVM, which get()'s make() would need: a NewObject each for the wrapper and its cleanup).
// The Java side (example.Wrapper's accessor; WrapperCleanup, a PhantomReference<Wrapper>,
// holds the token in two long fields, pointer and weak, and track() keeps it reachable):
//   Wrapper child(int i) {
//     Wrapper w = find(pointer, i);                              // the hit: one JNI call
//     if (w != null) return w;
//     long n = childPointer(pointer, i);
//     Wrapper made = new Wrapper(n);
//     WrapperCleanup cleanup = new WrapperCleanup(made, n);     // before it is cached
//     w = publish(n, made, cleanup);
//     if (w == made) cleanup.track();  // cached: publish() gave it its token; else garbage
//     return w;
//   }
// Example:
//   #include <palrt/jni/identity_cache.hpp>
//   struct node {  // the library's native objects
//     const void* children[4];
//   };
//   struct binding {  // the library's state, made in JNI_OnLoad and never destroyed
//     static inline palrt::jni::identity_cache* cache;
//     static inline jfieldID cleanup_weak;  // long WrapperCleanup.weak: the token's reference
//   };
//   extern "C" JNIEXPORT jint JNI_OnLoad(JavaVM* vm, void*) {
//     JNIEnv* env = nullptr;
//     if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
//     jclass c = env->FindClass("example/WrapperCleanup");
//     if (!c || !(binding::cleanup_weak = env->GetFieldID(c, "weak", "J"))) return JNI_ERR;
//     binding::cache = new palrt::jni::identity_cache(vm);
//     // ... RegisterNatives(find, childPointer, publish, forget, settle)
//     return JNI_VERSION_1_8;
//   }
//   // Wrapper.find(parent, i): the live wrapper of a child, or null (Java makes one).
//   jobject find(JNIEnv* env, jclass, jlong parent, jint i) {
//     return binding::cache->find(env, reinterpret_cast<node*>(parent)->children[i]);
//   }
//   // Wrapper.publish(native, wrapper, cleanup): caches Java's new wrapper, or returns the
//   // live one another thread cached meanwhile.
//   jobject publish(JNIEnv* env, jclass, jlong native, jobject wrapper, jobject cleanup) {
//     auto e = binding::cache->insert(env, reinterpret_cast<const void*>(native), wrapper);
//     if (e.created)  // cached: the cleanup keeps the token, (native, weak); no call into Java
//       env->SetLongField(cleanup, binding::cleanup_weak, reinterpret_cast<jlong>(e.weak));
//     return e.wrapper;  // null: a Java exception is pending
//   }
//   // The cleanup thread's natives: forget() for each cleanup it takes off its
//   // ReferenceQueue (it holds the token, never the wrapper), settle() when the queue is empty.
//   void forget(JNIEnv* env, jclass, jlong native, jlong weak) {
//     binding::cache->forget(env, reinterpret_cast<const void*>(native), reinterpret_cast<jweak>(weak));
//   }
//   void settle(JNIEnv*, jclass) {
//     binding::cache->settle();
//   }
// Make everything the wrapper needs before insert() (or in get()'s make()): once the wrapper
// is cached, a failure (an OutOfMemoryError from allocating its cleanup) would leave it
// cached with no cleanup. The weak field is written once, before track() links the cleanup
// under the list's lock, which the cleanup thread takes to unlink it: that orders the write
// before its read. A java.lang.ref.Cleaner works too (its action holding the token), but
// costs 80 bytes of Java heap per wrapper against 56 for a PhantomReference subclass that is
// the token, and its thread cannot settle(). get(env, native, make) is the miss path for a
// binding whose wrappers are made in native code.
// tools/hosts/jvm/ is that binding, with its suite and its benchmark; its cleanup thread
// passes the tokens of up to 64 cleanups to one native call that forgets each.
//
// Dying wrappers. The JVM clears a weak reference when its object becomes unreachable, and
// the wrapper's cleanup runs later, on the cleaner's thread. In between, the entry is still
// cached and its weak reference is cleared: NewLocalRef returns null. The cache's policy
// refuses it (try_acquire is false), so get() makes a new wrapper and it replaces the dying
// one in the entry; when the dying wrapper's cleanup runs, forget() finds the identity
// mapped to another weak reference and leaves the entry alone (the token names the mapping,
// not the identity), then deletes its own weak reference. So no lookup ever hands out a
// wrapper the collector found unreachable, however late the cleaner runs.
//
// Deleting a weak reference. A lookup on another thread may have found the entry just
// before forget() erased it and be calling NewLocalRef on its weak reference right now;
// deleting the reference at once would let the JVM reuse its slot for another object,
// which that lookup would then hand out as this native object's wrapper. So forget()
// deletes it after a grace period (palrt::gc::retire: every read section open at the call
// has closed), on whichever thread runs the due reclaims (a thread not attached to the JVM
// is attached as a daemon for the call). gc::retire collects a thread's retirements in a
// batch of its own (64): the cleanup thread calls settle() when it runs out of cleanups, so
// that the last ones of a burst are deleted now and not when 64 more wrappers have died.
//
// The end of the runtime. close() is where the binding's JVM ends for it: before
// DestroyJavaVM in a program that embeds the JVM (the JVM's daemon threads, the cleaner's
// among them, may still be running native code then), or in JNI_OnUnload. After close():
//   - get() and insert() raise IllegalStateException and return null; find() returns
//     null. No lookup calls into the JVM any more: close() waited for those in progress.
//   - forget() still works, and deletes at once (no lookup can be reading a weak reference).
//   - every weak reference whose deletion palrt had queued has been deleted when close()
//     returns (it drains them: the cleanup thread's last ones are queued by its settle()),
//     so none is deleted after the JVM is gone.
//   - the weak references of wrappers still alive stay cached: they belong to the JVM, which
//     frees them when it ends, or their cleanup deletes them when it runs.
// Nothing the cache holds is deleted twice: each weak reference is deleted by the one
// forget() its wrapper's cleanup makes (or by get() or insert() if it never was cached).
// Destroying the cache is allowed only when no thread can call it any more (its cleanups
// included); a binding made in JNI_OnLoad keeps it until the process exits.
//
// Costs (docs/BENCHMARKS.md, "JVM host"): a hit is a JNI transition (the native call itself),
// a read section, the probe and a NewLocalRef; a miss through insert() adds the wrapper and
// its cleanup allocated in Java, a second JNI transition, the probe again, a NewWeakGlobalRef
// and the insert (get()'s make() would add its upcalls instead: each NewObject from native
// code costs several times the allocation in Java); a wrapper's end costs an erase and a
// retire, and its share of its cleanup's JNI call (one call may forget a batch).
//
// Thread safety: every member from any thread attached to the JVM, concurrently.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <jni.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <utility>

#include "palrt/gc/read_section.hpp"
#include "palrt/gc/retire.hpp"
#include "palrt/interop/host_identity_cache.hpp"

namespace palrt::jni {

class identity_cache {
 public:
  // What get() returns.
  struct entry {
    jobject wrapper = nullptr;  // a new local reference; null: a Java exception is pending
    jweak weak = nullptr;       // the cache's weak global reference to the wrapper: with the
                                // native pointer, the token its cleanup passes to forget()
    bool created = false;       // true: make() made it now and it is cached; the binding
                                // registers its cleanup with (native, weak)
  };

  explicit identity_cache(JavaVM* vm, interop::host_cache_options options = {})
      : cache_(weak_reference_policy{}, options) {
    the_vm().store(vm, std::memory_order_release);
  }
  identity_cache(const identity_cache&) = delete;
  identity_cache& operator=(const identity_cache&) = delete;

  // The live wrapper of `native`; if none lives, make(env, native) -> jobject (a new local
  // reference to a new wrapper, or null with a Java exception pending) is called with no
  // lock held, and cached through a new weak global reference. If another thread cached a
  // live wrapper meanwhile, that one is returned (created false) and make()'s is dropped.
  // Failures are Java exceptions, pending when wrapper is null: make()'s own,
  // OutOfMemoryError, IllegalStateException after close(), IllegalArgumentException for a
  // null native.
  template <class Make>
  [[nodiscard]] entry get(JNIEnv* env, const void* native, Make&& make) noexcept;

  // Caches a wrapper the binding made itself (in Java, after find() missed: cheaper than
  // make() through JNI upcalls), unless a live one is cached meanwhile, which is returned
  // (created false) and `wrapper` is not cached. created true: `wrapper` is cached, returned
  // as a new local reference. Make everything the wrapper needs (its cleanup) before the call,
  // as get()'s make() does. Failures as get()'s, and NullPointerException for a null wrapper.
  [[nodiscard]] entry insert(JNIEnv* env, const void* native, jobject wrapper) noexcept {
    if (!wrapper) {
      throw_java(env, "java/lang/NullPointerException", "palrt::jni::identity_cache::insert: null wrapper");
      return {};
    }
    // get()'s miss path, whose make() hands over the binding's wrapper: one miss path (the
    // probe, the dying entry replaced, the race lost), whichever side made the wrapper.
    return get(env, native, [wrapper](JNIEnv* jni, const void*) -> jobject { return jni->NewLocalRef(wrapper); });
  }

  // The live wrapper of `native` (a new local reference), or null. No Java exception.
  [[nodiscard]] jobject find(JNIEnv* env, const void* native) noexcept {
    call c{env};
    return cache_.try_get(&c, native) ? c.acquired : nullptr;
  }

  // From the cleanup of a wrapper get() created: removes the entry if it still maps
  // `native` to `weak`, and deletes `weak` (after a grace period; at once after close()).
  // Exactly once per created wrapper.
  void forget(JNIEnv* env, const void* native, jweak weak) noexcept {
    cache_.erase(interop::host_token(native, weak));  // false: a newer wrapper replaced it
    bool retired = false;
    {
      gc::read_section section;  // close() waits for it: a retire below is one it drains
      if (!quiesced_.load(std::memory_order_acquire)) {
        try {
          gc::retire(weak, &delete_weak_reference);
          retired = true;
        } catch (const std::bad_alloc&) {
          // Not retired: wait for the lookups that may hold it instead (below, outside the
          // section), then delete it here.
        }
      }
    }
    if (retired) return;
    if (!quiesced_.load(std::memory_order_acquire)) cache_.synchronize();
    env->DeleteWeakGlobalRef(weak);
    counts().deleted.fetch_add(1, std::memory_order_relaxed);
  }

  // A cleanup's token: what forget() takes.
  struct token {
    const void* native;
    jweak weak;
  };
  // forget() of each token, for a cleanup thread that takes several cleanups at once: the
  // same effect for a fraction of the cost. The weak references are retired together, up to
  // 64 in one retirement whose reclaim deletes them all, so that a burst of cleanups costs
  // one retirement and a share of a grace period per 64 wrappers, not per wrapper.
  void forget(JNIEnv* env, std::span<const token> tokens) noexcept {
    while (!tokens.empty()) {
      const std::size_t n = std::min(tokens.size(), weak_batch::capacity);
      forget_batch(env, tokens.first(n));
      tokens = tokens.subspan(n);
    }
  }

  // On the thread that calls forget(), when it has no more cleanups to run: deletes the weak
  // references its forget() calls retired (its partial batch), once a grace period has
  // passed, and whatever else is due. Waits for that grace period (microseconds; longer
  // while a lookup's thread is preempted inside its read section).
  void settle() noexcept {
    while (!gc::drain_retired()) {
    }
  }

  // The end of the runtime (see the top of this file). Idempotent.
  void close(JNIEnv* env) noexcept {
    try {
      cache_.close();  // returns once no lookup is in progress: none will touch a weak reference
      quiesced_.store(true, std::memory_order_release);
      // The forget() calls that read quiesced_ false (in a read section) have retired their
      // reference once this returns; a later one sees it true and deletes at once.
      cache_.synchronize();
    } catch (const std::logic_error& e) {  // inside a read section: a binding's bug
      throw_java(env, "java/lang/IllegalStateException", e.what());
      return;
    }
    // What was queued: a reclaim does not block (DeleteWeakGlobalRef), so this ends.
    while (!gc::drain_retired()) {
    }
  }
  bool closed() const noexcept { return cache_.closed(); }

  interop::host_cache_counters counters() const { return cache_.counters(); }
  // Weak global references made and deleted by every identity_cache of this library (the
  // deletions run on whichever thread reclaims them, which knows no cache): equal when none
  // is held.
  static std::uint64_t weak_refs_created() noexcept { return counts().created.load(std::memory_order_relaxed); }
  static std::uint64_t weak_refs_deleted() noexcept { return counts().deleted.load(std::memory_order_relaxed); }

 private:
  // One call's context: the calling thread's JNIEnv (a JNIEnv belongs to its thread), and the
  // local reference the policy made of the wrapper it acquired.
  struct call {
    JNIEnv* env;
    jobject acquired = nullptr;
  };
  // The cache's values are weak global references.
  struct weak_reference_policy {
    static constexpr interop::host_reclamation reclamation = interop::host_reclamation::grace_period;
    using context = call*;
    // A strong (local) reference, unless the collector cleared the weak one: a dying wrapper.
    bool try_acquire(call* c, void* weak) const noexcept {
      jobject local = c->env->NewLocalRef(static_cast<jweak>(weak));
      if (!local) return false;
      c->acquired = local;
      return true;
    }
    // Only ever the weak reference get() made for a wrapper that was not cached (it lost a
    // race, or the insert failed): never published, so no lookup can hold it.
    void release(call* c, void* weak) const noexcept {
      c->env->DeleteWeakGlobalRef(static_cast<jweak>(weak));
      counts().deleted.fetch_add(1, std::memory_order_relaxed);
    }
  };
  struct reference_counts {
    std::atomic<std::uint64_t> created{0};
    std::atomic<std::uint64_t> deleted{0};
  };
  // Thrown through get_or_create() when make() or NewWeakGlobalRef left an exception pending.
  struct java_exception_pending {};

  static reference_counts& counts() noexcept {
    static reference_counts c;
    return c;
  }
  static std::atomic<JavaVM*>& the_vm() noexcept {
    static std::atomic<JavaVM*> vm{nullptr};  // a process has one JVM (HotSpot's limit)
    return vm;
  }
  static void throw_java(JNIEnv* env, const char* class_name, const char* message) noexcept {
    if (env->ExceptionCheck()) return;  // one pending already
    if (jclass c = env->FindClass(class_name)) env->ThrowNew(c, message);  // else: one pending
  }
  // Weak references retired together (forget(tokens)).
  struct weak_batch {
    static constexpr std::size_t capacity = 64;
    std::size_t count = 0;
    jweak refs[capacity];
  };

  void forget_batch(JNIEnv* env, std::span<const token> tokens) noexcept {
    if (tokens.size() == 1) return forget(env, tokens[0].native, tokens[0].weak);  // no batch to allocate
    for (const token& t : tokens) cache_.erase(interop::host_token(t.native, t.weak));
    std::unique_ptr<weak_batch> batch(new (std::nothrow) weak_batch);
    if (batch) {
      for (const token& t : tokens) batch->refs[batch->count++] = t.weak;
      gc::read_section section;  // as forget()'s: close() waits for it
      if (!quiesced_.load(std::memory_order_acquire)) {
        try {
          gc::retire(batch.get(), &delete_weak_batch);
          batch.release();  // the reclaim frees it
          return;
        } catch (const std::bad_alloc&) {
        }
      }
    }
    // No memory for the batch or its retirement (or closed): as forget()'s fallback.
    if (!quiesced_.load(std::memory_order_acquire)) cache_.synchronize();
    for (const token& t : tokens) env->DeleteWeakGlobalRef(t.weak);
    counts().deleted.fetch_add(tokens.size(), std::memory_order_relaxed);
  }

  // gc::retire's reclaims, on whichever thread runs them.
  static void delete_weak_reference(void* weak) noexcept {
    jweak one = static_cast<jweak>(weak);
    delete_weak_references(&one, 1);
  }
  static void delete_weak_batch(void* batch) noexcept {
    std::unique_ptr<weak_batch> b(static_cast<weak_batch*>(batch));
    delete_weak_references(b->refs, b->count);
  }
  static void delete_weak_references(const jweak* refs, std::size_t count) noexcept {
    JavaVM* vm = the_vm().load(std::memory_order_acquire);
    JNIEnv* env = nullptr;
    const jint got = vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8);
    bool attached = false;
    if (got == JNI_EDETACHED) {
      // A thread the JVM does not know (a native thread that retires for its own reasons).
      if (vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), nullptr) != JNI_OK) {
        env = nullptr;  // cannot reach the JVM: it is ending, and it frees its references
      } else {
        attached = true;
      }
    } else if (got != JNI_OK) {
      env = nullptr;
    }
    if (env) {
      for (std::size_t k = 0; k < count; ++k) env->DeleteWeakGlobalRef(refs[k]);
      counts().deleted.fetch_add(count, std::memory_order_relaxed);
    }
    if (attached) vm->DetachCurrentThread();
  }

  interop::host_identity_cache<weak_reference_policy> cache_;
  // Set by close() once no lookup can hold a weak reference any more (release/acquire: what
  // close() waited for happens before a forget() that reads it true deletes at once). Read
  // inside a read section: close() then waits for the forget() calls that read it false.
  std::atomic<bool> quiesced_{false};
};

template <class Make>
identity_cache::entry identity_cache::get(JNIEnv* env, const void* native, Make&& make) noexcept {
  call c{env};
  jobject made = nullptr;
  try {
    interop::host_entry e = cache_.get_or_create(&c, native, [&](const void*) -> void* {
      made = make(env, native);
      if (!made) throw java_exception_pending{};
      jweak weak = env->NewWeakGlobalRef(made);
      if (!weak) throw java_exception_pending{};  // OutOfMemoryError
      counts().created.fetch_add(1, std::memory_order_relaxed);
      return weak;
    });
    if (e.inserted) return {made, static_cast<jweak>(e.wrapper), true};
    if (made) env->DeleteLocalRef(made);  // lost a race: the winner, acquired, is returned
    return {c.acquired, static_cast<jweak>(e.wrapper), false};
  } catch (const java_exception_pending&) {
  } catch (const interop::host_cache_closed& e) {
    throw_java(env, "java/lang/IllegalStateException", e.what());
  } catch (const std::invalid_argument& e) {
    throw_java(env, "java/lang/IllegalArgumentException", e.what());
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "palrt::jni::identity_cache: a table could not grow");
  } catch (const std::exception& e) {  // make()'s own C++ exception, or a fork()ed child's
    throw_java(env, "java/lang/RuntimeException", e.what());
  } catch (...) {
    throw_java(env, "java/lang/RuntimeException", "palrt::jni::identity_cache::get: make() threw");
  }
  if (made) env->DeleteLocalRef(made);
  return {};
}

}  // namespace palrt::jni

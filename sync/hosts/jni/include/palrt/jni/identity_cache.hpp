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
// and on a miss Java allocates the wrapper itself and hands it to insert() (JNI calls from
// Java into native code are far cheaper than calls from native code into the JVM, which
// get()'s make() would need: a NewObject). And nothing runs per wrapper when it dies: the
// binding calls sweep() after the JVM collected, which removes the entries whose weak
// reference the collector cleared. The Java side (example.Wrapper's accessor, and a daemon
// thread that sweeps once per collection):
//   Wrapper child(int i) {
//     Wrapper w = find(pointer, i);            // the hit: one JNI call
//     if (w != null) return w;
//     long n = childPointer(pointer, i);
//     return publish(n, new Wrapper(n));       // ours, or the one another thread cached first
//   }
//   // The sweeper: a weak reference to a fresh object is cleared by the next collection
//   // (the next young one), which is when cleared wrappers can be found. The next canary is
//   // made before sweeping, so a collection during the sweep is not missed.
//   ReferenceQueue<Object> queue = new ReferenceQueue<>();
//   WeakReference<Object> canary = new WeakReference<>(new Object(), queue);
//   for (;;) { queue.remove(); canary = new WeakReference<>(new Object(), queue); sweep(); }
// Example:
//   #include <palrt/jni/identity_cache.hpp>
//   struct node {  // the library's native objects
//     const void* children[4];
//   };
//   struct binding {  // the library's state, made in JNI_OnLoad and never destroyed
//     static inline palrt::jni::identity_cache* cache;
//   };
//   extern "C" JNIEXPORT jint JNI_OnLoad(JavaVM*, void*) {
//     binding::cache = new palrt::jni::identity_cache;
//     // ... RegisterNatives(find, childPointer, publish, sweep)
//     return JNI_VERSION_1_8;
//   }
//   // Wrapper.find(parent, i): the live wrapper of a child, or null (Java makes one).
//   jobject find(JNIEnv* env, jclass, jlong parent, jint i) {
//     return binding::cache->find(env, reinterpret_cast<node*>(parent)->children[i]);
//   }
//   // Wrapper.publish(native, wrapper): caches Java's new wrapper, or returns the live one
//   // another thread cached meanwhile. Null: a Java exception is pending.
//   jobject publish(JNIEnv* env, jclass, jlong native, jobject wrapper) {
//     return binding::cache->insert(env, reinterpret_cast<const void*>(native), wrapper).wrapper;
//   }
//   // The sweeper thread's native, once per collection.
//   jlong sweep(JNIEnv* env, jclass) {
//     return static_cast<jlong>(binding::cache->sweep(env));
//   }
// tools/hosts/jvm/ is that binding, with its suite and its benchmark.
//
// Why a sweep and not a cleanup per wrapper (java.lang.ref.Cleaner, or a PhantomReference of
// the binding's own that calls a native forget()): a cleanup is a Java object per wrapper (56
// to 80 bytes, more than the 24 of a small wrapper), which the collector discovers, the JDK's
// reference handler thread queues and a cleanup thread takes, one by one, before a native
// call removes the entry: on a churning binding, more than the rest of a wrapper's life cost
// (docs/BENCHMARKS.md, "The JVM host"). The JVM clears a weak global reference in place, as
// part of the collection, and a sweep finds the cleared ones in a walk of the table (an
// IsSameObject each), removing them in bulk and deleting their references after one grace
// period for the whole sweep. HotSpot keeps its own weak tables (interned strings, resolved
// method names) the same way: weak handles the collector clears, cleaned by a pass after it.
// A binding whose wrappers own native resources still frees them in a Cleaner of its own;
// the cache needs nothing from it.
//
// Dying wrappers. Between the collection that cleared a wrapper's weak reference and the
// sweep after it, the entry is still cached and NewLocalRef returns null. The cache's policy
// refuses it (try_acquire is false), so a lookup misses and insert() replaces the dying entry
// with the new wrapper; the dying one's weak reference is deleted by the next sweep. So no
// lookup ever hands out a wrapper the collector found unreachable, however late the sweep.
//
// Deleting a weak reference. A lookup on another thread may have found an entry just before
// a sweep removed it, and be calling NewLocalRef on its weak reference right now; deleting
// the reference at once would let the JVM reuse its slot for another object, which that
// lookup would then hand out as this native object's wrapper. So sweep() deletes what it
// removed (and what inserts replaced since the last sweep) only after a grace period: every
// read section open when the removals were done has closed (one process-wide barrier per
// sweep; longer while a lookup's thread is preempted inside its read section).
//
// The end of the runtime. close() is where the binding's JVM ends for it: before
// DestroyJavaVM in a program that embeds the JVM (the JVM's daemon threads, the sweeper
// among them, may still be running native code then), or in JNI_OnUnload. close() sweeps a
// last time (the JVM is still there), then:
//   - get() and insert() raise IllegalStateException and return null; find() returns null;
//     sweep() does nothing and returns 0. No call touches the JVM any more: close() waited
//     for the lookups and the sweep in progress.
//   - every weak reference the cache removed has been deleted, once.
//   - the weak references still cached (their wrappers alive, or collected since the last
//     sweep) stay: they belong to the JVM, which frees them when it ends.
// Nothing the cache holds is deleted twice: each weak reference is deleted by the one sweep
// (or close()) after its entry was removed, or by get() or insert() if it never was cached.
// Destroying the cache is allowed only when no thread can call it any more (its sweeper
// included); a binding made in JNI_OnLoad keeps it until the process exits.
//
// Costs (docs/BENCHMARKS.md, "JVM host"): a hit is a JNI transition (the native call itself),
// a read section, the probe and a NewLocalRef; a miss through insert() adds the wrapper
// allocated in Java, a second JNI transition, the probe under the bucket's lock, a
// NewWeakGlobalRef and the insert (get()'s make() would add its upcall instead: a NewObject
// from native code costs several times the allocation in Java); a wrapper's end costs its
// share of a sweep: an IsSameObject, a slot written, a DeleteWeakGlobalRef, and of one barrier.
// A sweep walks every entry, live ones included (an IsSameObject each): a binding with many
// long-lived wrappers and frequent young collections may sweep every few collections instead.
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
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "palrt/interop/host_identity_cache.hpp"

namespace palrt::jni {

class identity_cache {
 public:
  // What get() and insert() return.
  struct entry {
    jobject wrapper = nullptr;  // a new local reference; null: a Java exception is pending
    bool created = false;       // true: the one make() made (or insert() was given) is cached
  };

  explicit identity_cache(interop::host_cache_options options = {}) : cache_(weak_reference_policy{}, options) {}
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
  // make() through a JNI upcall), unless a live one is cached meanwhile, which is returned
  // (created false) and `wrapper` is not cached. created true: `wrapper` is cached, returned
  // as a new local reference. Failures as get()'s, and NullPointerException for a null wrapper.
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

  // Removes the entries whose wrapper the collector cleared, and deletes their weak
  // references and those of the dying entries insert() replaced since the last sweep, after a
  // grace period (which it waits for: one barrier, microseconds). Returns how many entries it
  // removed. Call it after the JVM collected (see the top of this file); any thread, any
  // time, concurrently with everything (sweeps take turns). After close(): nothing, 0. On an
  // allocation failure it removes what it can and leaves the rest for the next sweep.
  std::size_t sweep(JNIEnv* env) noexcept;

  // The end of the runtime (see the top of this file). Idempotent.
  void close(JNIEnv* env) noexcept;
  bool closed() const noexcept { return cache_.closed(); }

  interop::host_cache_counters counters() const { return cache_.counters(); }
  // Weak global references this cache made and deleted: equal when it holds none.
  std::uint64_t weak_refs_created() const noexcept { return created_.load(std::memory_order_relaxed); }
  std::uint64_t weak_refs_deleted() const noexcept { return deleted_.load(std::memory_order_relaxed); }

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
    // race, or the insert failed): never published, so no lookup can hold it. get() counts it.
    void release(call* c, void* weak) const noexcept { c->env->DeleteWeakGlobalRef(static_cast<jweak>(weak)); }
  };
  // Thrown through get_or_create() when make() or NewWeakGlobalRef left an exception pending.
  struct java_exception_pending {};

  static void throw_java(JNIEnv* env, const char* class_name, const char* message) noexcept {
    if (env->ExceptionCheck()) return;                                     // one pending already
    if (jclass c = env->FindClass(class_name)) env->ThrowNew(c, message);  // else: one pending
  }
  // A dying entry's weak reference that an insert replaced: deleted by the next sweep.
  void replaced(JNIEnv* env, jweak weak) noexcept;
  void delete_references(JNIEnv* env, std::span<const jweak> refs) noexcept {
    for (jweak w : refs) env->DeleteWeakGlobalRef(w);
    deleted_.fetch_add(refs.size(), std::memory_order_relaxed);
  }

  interop::host_identity_cache<weak_reference_policy> cache_;
  std::atomic<std::uint64_t> created_{0};
  std::atomic<std::uint64_t> deleted_{0};
  // Held by a sweep from start to end and by close(): sweeps take turns, and close() waits for
  // the one in progress, so that none deletes a reference after close() returned.
  std::mutex sweep_lock_;
  // Weak references removed from the table and not deleted yet (a grace period must pass):
  // those inserts replaced, until the next sweep takes them. A leaf lock.
  std::mutex pending_lock_;
  std::vector<jweak> pending_;  // guarded by pending_lock_
  bool quiesced_ = false;       // guarded by sweep_lock_: close() ran; sweep() does nothing
};

template <class Make>
identity_cache::entry identity_cache::get(JNIEnv* env, const void* native, Make&& make) noexcept {
  call c{env};
  jobject made = nullptr;
  jweak weak = nullptr;
  try {
    interop::host_entry e = cache_.get_or_create(&c, native, [&](const void*) -> void* {
      made = make(env, native);
      if (!made) throw java_exception_pending{};
      weak = env->NewWeakGlobalRef(made);
      if (!weak) throw java_exception_pending{};  // OutOfMemoryError
      created_.fetch_add(1, std::memory_order_relaxed);
      return weak;
    });
    if (e.inserted) {
      if (e.replaced) replaced(env, static_cast<jweak>(e.replaced));
      return {made, true};
    }
    if (weak) deleted_.fetch_add(1, std::memory_order_relaxed);  // the policy's release() deleted it
    if (made) env->DeleteLocalRef(made);                         // lost a race: the winner, acquired, is returned
    return {c.acquired, false};
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
  if (weak) deleted_.fetch_add(1, std::memory_order_relaxed);  // the policy's release() deleted it
  if (made) env->DeleteLocalRef(made);
  return {};
}

inline void identity_cache::replaced(JNIEnv* env, jweak weak) noexcept {
  {
    std::lock_guard<std::mutex> lock(pending_lock_);
    try {
      pending_.push_back(weak);
      return;
    } catch (const std::bad_alloc&) {
    }
  }
  // No memory to keep it for the sweep: wait for the lookups that may hold it, then delete it
  // here (not inside a read section: get_or_create() has returned).
  cache_.synchronize();
  delete_references(env, {&weak, 1});
}

inline std::size_t identity_cache::sweep(JNIEnv* env) noexcept {
  std::lock_guard<std::mutex> turn(sweep_lock_);
  if (quiesced_) return 0;
  std::vector<jweak> dead;
  std::size_t removed = 0;
  try {
    removed = cache_.sweep_concurrently([&](std::span<void* const> weaks, std::span<bool> alive) {
      dead.reserve(dead.size() + weaks.size());  // may throw: then this batch stays as it was
      for (std::size_t i = 0; i < weaks.size(); ++i) {
        alive[i] = !env->IsSameObject(static_cast<jweak>(weaks[i]), nullptr);
        if (!alive[i]) dead.push_back(static_cast<jweak>(weaks[i]));
      }
    });
  } catch (const std::bad_alloc&) {
    removed = dead.size();             // the batches removed before the failure: deleted below
  } catch (const std::exception& e) {  // nothing a JVM process meets (a fork()ed child's error)
    throw_java(env, "java/lang/IllegalStateException", e.what());
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(pending_lock_);
    if (dead.empty()) {
      dead.swap(pending_);
    } else {
      try {
        dead.insert(dead.end(), pending_.begin(), pending_.end());
        pending_.clear();
      } catch (const std::bad_alloc&) {  // the replaced ones wait for the next sweep
      }
    }
  }
  if (dead.empty()) return removed;
  // Every reference in `dead` was unlinked before this: once no read section open now is
  // still open, no lookup holds one.
  try {
    cache_.synchronize();
  } catch (const std::logic_error& e) {
    // Called inside a read section (a binding's bug): it would wait for itself. Deleting now
    // is unsafe; the references wait for the next sweep (or stay the JVM's, with no memory).
    std::lock_guard<std::mutex> lock(pending_lock_);
    try {
      pending_.insert(pending_.end(), dead.begin(), dead.end());
    } catch (const std::bad_alloc&) {
    }
    throw_java(env, "java/lang/IllegalStateException", e.what());
    return removed;
  }
  delete_references(env, dead);
  return removed;
}

inline void identity_cache::close(JNIEnv* env) noexcept {
  sweep(env);  // the last one with the JVM there
  std::lock_guard<std::mutex> turn(sweep_lock_);
  if (quiesced_) return;
  try {
    cache_.close();                      // returns once no lookup or insert is in progress
  } catch (const std::logic_error& e) {  // inside a read section: a binding's bug
    throw_java(env, "java/lang/IllegalStateException", e.what());
    return;
  }
  quiesced_ = true;
  // What inserts replaced since the sweep above (none can replace any more): its own grace
  // period, as a sweep's.
  std::vector<jweak> dead;
  {
    std::lock_guard<std::mutex> lock(pending_lock_);
    dead.swap(pending_);
  }
  if (dead.empty()) return;
  cache_.synchronize();
  delete_references(env, dead);
}

}  // namespace palrt::jni

// SPDX-License-Identifier: MIT
// palrt::gc::object: the objects of palrt's embedded collector, and ref<T>, the strong
// reference that keeps one alive.
//
// palrt runs with no host GC of its own (the CLI, the tests, the benchmarks, a host that
// has none), so it brings a minimal one: an object carries an intrusive strong count. When
// the count reaches zero the object is dead, and zero is terminal: a weak handle's try_get()
// never revives it. The object is not freed then, but handed to its collector, whose next
// collect() clears the weak handles that refer to it, runs its finalizer (if it is a
// `finalizable`) on the finalizer thread (without one, in collect()), and frees it only
// after a grace period, so that a thread that read a weak handle's target just before it
// was cleared never touches freed memory (collector.hpp has the whole life cycle).
//
// Example:
//   struct node : palrt::gc::object { int value = 0; };
//   palrt::gc::ref<node> n = palrt::gc::make_object<node>(collector);
//   palrt::gc::weak_handle<node> w(n);            // typed_handles.hpp
//   n.reset();                                      // dead now: w.try_get() is empty
//   collector.collect();                            // w cleared; n freed after a grace period
//
// Objects are created only by make_object (an object constructed any other way aborts with a
// message: the collector could not free it). A count that reaches zero is never raised again,
// except by a finalizer resurrecting its own object (finalizable::resurrect()).
//
// Costs: copying a ref is a relaxed increment, dropping one a decrement (acq_rel); the drop
// that reaches zero also pushes the object onto the dropping thread's own dead list of the
// collector (one compare-exchange on a cache line no other thread writes between
// collections), so objects made and dropped on different threads scale. The memory of an
// object comes from its thread's cache of freed objects (trim_object_memory() below): a
// load and a store, where the global allocator, handed thousands of frees at once by every
// collection, took the arena's slow paths. Counts are 32-bit: more than 4 billion references
// to one object is undefined.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace palrt::gc {

class collector;
class handle_table;
class finalizable;
template <class T>
class ref;
void suppress_finalize(finalizable& o) noexcept;
void reregister_for_finalize(finalizable& o) noexcept;

namespace internal {
struct collector_state;
class finalization_access;
}  // namespace internal
namespace detail {
class object_access;
}  // namespace detail

class object {
 public:
  object(const object&) = delete;
  object& operator=(const object&) = delete;

 protected:
  // Aborts, with a message, unless called by make_object (directly or through a derived
  // class's constructor).
  object();
  // Runs on the thread that frees the object: the one calling collect() (or the collector's
  // destructor), once the grace period has passed. It may drop references and release
  // handles; it must not throw.
  virtual ~object();

 public:
  // Objects' memory: a bounded cache per thread in front of the global operator new (see
  // trim_object_memory() below). A derived class may declare its own operator new and delete.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
  static void* operator new(std::size_t size, std::align_val_t alignment);  // not cached
  static void operator delete(void* p, std::size_t size, std::align_val_t alignment) noexcept;

 private:
  friend class collector;
  friend class finalizable;
  friend class detail::object_access;
  friend class internal::finalization_access;
  friend struct internal::collector_state;
  friend void suppress_finalize(finalizable& o) noexcept;
  friend void reregister_for_finalize(finalizable& o) noexcept;
  template <class>
  friend class ref;

  void add_ref() noexcept {
    // relaxed: the caller already holds a reference, so the object cannot die meanwhile.
    strong_.fetch_add(1, std::memory_order_relaxed);
  }
  // Raises a count that is not zero; false if the object is dead (zero is terminal).
  bool try_add_ref() noexcept {
    std::uint32_t n = strong_.load(std::memory_order_relaxed);
    // relaxed: the caller reached the object under a read section (it is not freed), and a
    // successful increment from n > 0 orders nothing else.
    while (n != 0)
      if (strong_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    return false;
  }
  void release() noexcept {
    // acq_rel: the last dropper sees every other holder's writes before the object is
    // finalized or destroyed.
    if (strong_.fetch_sub(1, std::memory_order_acq_rel) == 1) died();
  }
  void died() noexcept;  // hands the object to this thread's dead list of its collector

  std::atomic<std::uint32_t> strong_{1};
  // Finalization flags and the collector's state for this object (collector.cpp).
  std::atomic<std::uint8_t> flags_{0};
  std::atomic<std::uint8_t> state_{0};
  internal::collector_state* collector_;
  // Link in whichever one list the object is on: dead, finalization queue, finalized,
  // retired (collector.cpp: each list has one owner at a time).
  object* next_ = nullptr;
};

// An object with a finalizer: finalize() runs once on the finalizer thread (without one
// running, on the thread calling collect(): collector.hpp) after the object is found dead
// and its short weak handles are cleared, before its long weak handles are.
// Finalizable objects are registered for finalization when created; suppress_finalize()
// and reregister_for_finalize() (below) change that.
class finalizable : public object {
 protected:
  finalizable();
  // Called on the finalizer thread (or in collect()). An exception is contained: counted in
  // the finalizer's counters (the collector's when collect() ran it), reported, and the next
  // object's finalizer runs.
  virtual void finalize() = 0;
  // From finalize() only: brings this object back to life and returns the reference that
  // now keeps it alive (store it somewhere to keep it). Its long weak handles then keep
  // their target; its short ones stay cleared. It is not finalized again unless
  // reregister_for_finalize() is called. Outside finalize() it returns an empty ref.
  // Called again in the same finalize(), it returns another reference while one from the
  // first call is still held; once every such reference has been dropped the object is dead
  // again, for good (zero is terminal): resurrect() then returns an empty ref, and a later
  // collect() frees the object (after finalizing it again if it was reregistered).
  ref<finalizable> resurrect() noexcept;

 private:
  friend class internal::finalization_access;
};

// Gives the memory of freed objects that the calling thread keeps for its next objects back
// to the global allocator. make_object reuses the memory of objects freed on the same thread
// (a collection frees thousands at once; the next objects take their blocks back with a load
// and a store): each thread keeps up to 512 KiB of it, for objects up to 256 bytes with the
// default alignment, and gives it back when it exits. A thread that will make no more objects
// for a long time may give it back sooner with this call. Not cached in builds with
// AddressSanitizer or ThreadSanitizer (a reused block would hide a use after free).
void trim_object_memory() noexcept;

// The next time `o` is found dead, its finalizer does not run. Thread-safe.
void suppress_finalize(finalizable& o) noexcept;
// Undoes suppress_finalize(), or registers an object whose finalizer already ran (typically
// from finalize() with resurrect()), so that it is finalized again when next found dead.
void reregister_for_finalize(finalizable& o) noexcept;

// A strong reference: shared ownership of an object, like std::shared_ptr with the count in
// the object. Thread-safe like shared_ptr (distinct refs to one object may be used from
// different threads; one ref object is not synchronised).
template <class T>
class ref {
 public:
  using element_type = T;
  ref() noexcept = default;
  ref(std::nullptr_t) noexcept {}
  ref(const ref& other) noexcept : p_(other.p_) {
    if (p_) static_cast<object*>(p_)->add_ref();
  }
  ref(ref&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
  template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  ref(const ref<U>& other) noexcept : p_(other.get()) {
    if (p_) static_cast<object*>(p_)->add_ref();
  }
  template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  ref(ref<U>&& other) noexcept : p_(other.detach()) {}
  ref& operator=(ref other) noexcept {
    std::swap(p_, other.p_);
    return *this;
  }
  ~ref() {
    // Here rather than in the class: T may be incomplete where ref<T> is named (a member).
    static_assert(std::is_base_of_v<object, T>, "ref<T> needs T derived from palrt::gc::object");
    reset();
  }

  void reset() noexcept {
    if (T* p = std::exchange(p_, nullptr)) static_cast<object*>(p)->release();
  }
  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  friend bool operator==(const ref& a, const ref& b) noexcept { return a.p_ == b.p_; }

  // Takes over a count the caller already holds (no increment).
  [[nodiscard]] static ref adopt(T* p) noexcept {
    ref r;
    r.p_ = p;
    return r;
  }
  // Gives the count up to the caller without dropping it.
  [[nodiscard]] T* detach() noexcept { return std::exchange(p_, nullptr); }

 private:
  T* p_ = nullptr;
};

// A ref<To> to the same object (static_cast: the caller knows the dynamic type).
template <class To, class From>
[[nodiscard]] ref<To> static_ref_cast(ref<From> r) noexcept {
  return ref<To>::adopt(static_cast<To*>(r.detach()));
}

namespace detail {
// make_object's hand-off to object(): which collector the object being constructed on this
// thread belongs to.
class object_access {
 public:
  static void begin_construction(collector& c) noexcept;
  static void end_construction() noexcept;  // after a constructor threw
  static void created(object& o);           // the object exists: count it, maybe collect
  // The handle table of the object's collector (where its typed handles live).
  static handle_table& table_of(const object& o) noexcept;
  // The state of the object's collector, as an identity: unlike a table's or a collector's
  // address, it is never reused while an object of that collector exists (a collector
  // destroyed with objects alive keeps its state for the life of the process).
  static const internal::collector_state* collector_of(const object& o) noexcept { return o.collector_; }
  static void add_ref(object& o) noexcept { o.add_ref(); }
  static bool try_add_ref(object& o) noexcept { return o.try_add_ref(); }
  // Whether the count is not zero yet (relaxed: a snapshot; a caller that must keep the
  // object alive takes a reference with try_add_ref instead).
  static bool alive(const object& o) noexcept { return o.strong_.load(std::memory_order_relaxed) != 0; }
  static void release(object& o) noexcept { o.release(); }
  // The collector's bookkeeping (collector.cpp).
  static std::atomic<std::uint8_t>& state(object& o) noexcept { return o.state_; }
  static std::atomic<std::uint8_t>& flags(object& o) noexcept { return o.flags_; }
  static object* next(const object& o) noexcept { return o.next_; }
};
}  // namespace detail

// Creates a T belonging to `c` and returns the only reference to it. Throws what T's
// constructor or operator new throws (nothing is registered then). May run a collection
// first when the collector collects every N allocations (collector_options).
template <class T, class... Args>
[[nodiscard]] ref<T> make_object(collector& c, Args&&... args) {
  static_assert(std::is_base_of_v<object, T>, "make_object<T> needs T derived from palrt::gc::object");
  detail::object_access::begin_construction(c);
  T* p;
  try {
    p = new T(std::forward<Args>(args)...);
  } catch (...) {
    detail::object_access::end_construction();
    throw;
  }
  detail::object_access::created(*p);
  return ref<T>::adopt(p);
}

}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// palrt::cpython::identity_cache: the identity cache of a CPython extension module. Native
// pointer -> the Python object that wraps it: one wrapper per native object for as long as
// that wrapper lives, so that `get(n) is get(n)` in Python and a native object handed out
// twice is one Python object. The wrapper is the Python object itself; nothing stands beside
// it, and the entry goes in the wrapper's tp_dealloc, at once.
//
// The host mode of palrt's identity cache (palrt/interop/host_identity_cache.hpp) with
// host_reclamation::host_lock, the GIL being the host's lock: a hit is a hash, a probe of
// an open-addressing table and a Py_INCREF; no read section, no lock and no barrier.
//
// Example:
//   #include <palrt/cpython/identity_cache.hpp>
//   struct wrapper {
//     PyObject_HEAD
//     const void* native;
//   };
//   struct module_state {
//     static inline PyTypeObject* wrapper_type = nullptr;        // made at module init
//     static inline palrt::cpython::identity_cache cache;         // one per module
//   };
//   // Where the module hands a native object to Python: a new reference, or null with an
//   // exception set.
//   PyObject* wrapper_of(const void* native) {
//     return module_state::cache.get_or_create(native, [](const void* n) -> PyObject* {
//       wrapper* w = PyObject_New(wrapper, module_state::wrapper_type);
//       if (w) w->native = n;
//       return reinterpret_cast<PyObject*>(w);
//     });
//   }
//   // The wrapper type's tp_dealloc: forget() first, then weakrefs and fields, then free.
//   void wrapper_dealloc(PyObject* self) {
//     module_state::cache.forget(reinterpret_cast<wrapper*>(self)->native, self);
//     Py_TYPE(self)->tp_free(self);
//   }
// The worked example is the registry module in tools/hosts/cpython/.
//
// The rules:
// - Every call holds the GIL (checked by assert() in builds without NDEBUG), and the cache is
//   used by one interpreter.
// - forget() goes first in tp_dealloc. Then a weakref callback that asks for the dying
//   wrapper's native object gets a new wrapper (the dying one is no longer cached), and the
//   dying object's memory, once freed, cannot be found. A wrapper whose reference count is
//   zero is never handed out even if forget() comes later (it is replaced: counters()
//   .dead_replaced), and the later forget() does not remove its replacement: an entry is
//   removed only by the wrapper it maps to.
// - The cache holds no reference: a wrapper lives for as long as Python holds it. Cycles
//   through a wrapper are the cycle collector's business (the wrapper type traverses what it
//   holds); a wrapper a weakref callback or __del__ resurrects stays cached, because it was
//   never forgotten.
// - The factory runs with nothing held but the GIL: it may run Python code, release the GIL
//   and call this cache again. If the native object got a wrapper meanwhile, the first one
//   wins: get_or_create() returns it and drops the factory's (counters().races_lost), whose
//   tp_dealloc then calls forget() for an entry that is not its own, which does nothing.
// - The cache must outlive its wrappers (each wrapper holding a reference to the module
//   object or registry that owns the cache keeps it so).
//
// Errors are Python's: get_or_create() returns null with an exception set
// (ValueError for a null native pointer, MemoryError when the table cannot grow, or whatever
// the factory raised), and never throw.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error (it includes nothing)

// Python.h before any standard header, as CPython asks.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cassert>
#include <new>
#include <stdexcept>

#include "palrt/interop/host_identity_cache.hpp"

namespace palrt::cpython {

// The host policy (host_identity_cache.hpp): a reference is Py_INCREF, refused once the count
// is zero (the object is in tp_dealloc); a lost factory result is Py_DECREF'd.
struct gil_policy {
  static constexpr interop::host_reclamation reclamation = interop::host_reclamation::host_lock;
  static bool try_acquire(void* wrapper) noexcept {
    PyObject* o = static_cast<PyObject*>(wrapper);
    if (Py_REFCNT(o) <= 0) return false;
    Py_INCREF(o);
    return true;
  }
  static void release(void* wrapper) noexcept { Py_DECREF(static_cast<PyObject*>(wrapper)); }
};

class identity_cache {
 public:
  identity_cache() = default;
  explicit identity_cache(interop::host_cache_options options) : cache_(options) {}

  // The wrapper of `native` (a new reference), or null with no exception set.
  [[nodiscard]] PyObject* find(const void* native) const noexcept {
    assert_gil();
    return static_cast<PyObject*>(cache_.try_get(native));
  }

  // The wrapper of `native` (a new reference); if it has none, `factory(native)` makes one
  // (a new reference, or null with a Python exception set, which is returned).
  template <class Factory>
  [[nodiscard]] PyObject* get_or_create(const void* native, Factory&& factory) noexcept {
    assert_gil();
    if (void* hit = cache_.try_get(native)) return static_cast<PyObject*>(hit);
    if (!native) return null_native();
    PyObject* made = factory(native);
    if (!made) return nullptr;
    return adopt_new(native, made);
  }

  // From the wrapper's tp_dealloc (first): removes the entry if it maps `native` to
  // `wrapper`. True if it did.
  bool forget(const void* native, PyObject* wrapper) noexcept {
    assert_gil();
    return cache_.erase(interop::host_token(native, wrapper));
  }

  interop::host_cache_counters counters() const { return cache_.counters(); }

 private:
  static void assert_gil() noexcept { assert(PyGILState_Check()); }
  static PyObject* null_native() noexcept {
    PyErr_SetString(PyExc_ValueError, "palrt::cpython::identity_cache: a null native pointer has no wrapper");
    return nullptr;
  }
  // `made`: a reference this call owns.
  PyObject* adopt_new(const void* native, PyObject* made) noexcept {
    interop::host_entry e;
    try {
      e = cache_.insert(native, made);
    } catch (const std::bad_alloc&) {
      Py_DECREF(made);
      return PyErr_NoMemory();
    } catch (const std::exception& error) {  // a reserved identity: ~0
      Py_DECREF(made);
      PyErr_SetString(PyExc_ValueError, error.what());
      return nullptr;
    }
    if (!e.inserted) Py_DECREF(made);  // the first wrapper won; e.wrapper is acquired
    return static_cast<PyObject*>(e.wrapper);
  }

  interop::host_identity_cache<gil_policy> cache_;
};

}  // namespace palrt::cpython

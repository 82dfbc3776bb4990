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
// The cache and the wrapper type belong to one module object, in its module state (multi-phase
// init, PEP 489), so that each interpreter that imports the module has its own (Interpreters,
// below).
//
// Example:
//   #include <palrt/cpython/identity_cache.hpp>
//   #include <new>
//   struct module_state {  // CPython allocates it zeroed, and frees it
//     PyTypeObject* wrapper_type;             // a reference, made by module_exec()
//     palrt::cpython::identity_cache* cache;  // owned, made by module_exec()
//   };
//   struct wrapper {
//     PyObject_HEAD
//     const void* native;
//     PyObject* module;  // a reference, dropped in tp_dealloc: the cache outlives the wrapper
//   };
//   module_state* state_of(PyObject* module) {
//     return static_cast<module_state*>(PyModule_GetState(module));
//   }
//   // Where the module hands a native object to Python (`module`: a module-level function's
//   // self, or PyType_GetModuleByDef() of a method's type): a new reference, or null with an
//   // exception set.
//   PyObject* wrapper_of(PyObject* module, const void* native) {
//     module_state* state = state_of(module);
//     return state->cache->get_or_create(native, [&](const void* n) -> PyObject* {
//       if (!state->wrapper_type) {  // module_clear() ran: the module is being torn down
//         PyErr_SetString(PyExc_RuntimeError, "example: the module was cleared");
//         return nullptr;
//       }
//       wrapper* w = PyObject_New(wrapper, state->wrapper_type);
//       if (!w) return nullptr;
//       w->native = n;
//       w->module = Py_NewRef(module);
//       return reinterpret_cast<PyObject*>(w);
//     });
//   }
//   // The wrapper type's tp_dealloc: forget() first, then weakrefs and fields, then free.
//   void wrapper_dealloc(PyObject* self) {
//     auto* w = reinterpret_cast<wrapper*>(self);
//     PyObject* module = w->module;
//     PyTypeObject* type = Py_TYPE(self);
//     state_of(module)->cache->forget(w->native, self);
//     type->tp_free(self);
//     Py_DECREF(type);  // a heap type: each instance holds a reference to it
//     Py_DECREF(module);
//   }
//   int module_exec(PyObject* module) {
//     // A literal name: CPython 3.11 keeps the spec's name as the type's tp_name.
//     static PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(wrapper_dealloc)}, {0, nullptr}};
//     static PyType_Spec spec = {"example.Wrapper", sizeof(wrapper), 0,
//                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, slots};
//     module_state* state = state_of(module);
//     state->wrapper_type = reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &spec, nullptr));
//     if (!state->wrapper_type) return -1;
//     state->cache = new (std::nothrow) palrt::cpython::identity_cache();
//     if (!state->cache) {
//       PyErr_NoMemory();
//       return -1;
//     }
//     return 0;
//   }
//   int module_traverse(PyObject* module, visitproc visit, void* arg) {
//     Py_VISIT(state_of(module)->wrapper_type);
//     return 0;
//   }
//   int module_clear(PyObject* module) {
//     Py_CLEAR(state_of(module)->wrapper_type);
//     return 0;
//   }
//   // When the module object is freed, and so after its last wrapper; also after a failed
//   // module_exec(), which leaves what it did not make null.
//   void module_free(void* module) {
//     module_clear(static_cast<PyObject*>(module));
//     delete state_of(static_cast<PyObject*>(module))->cache;
//   }
//   PyMODINIT_FUNC PyInit_example() {
//     static PyModuleDef_Slot slots[] = {{Py_mod_exec, reinterpret_cast<void*>(module_exec)}, {0, nullptr}};
//     static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "example", nullptr, sizeof(module_state),
//                                      nullptr, slots, module_traverse, module_clear, module_free};
//     return PyModuleDef_Init(&definition);
//   }
//
// The worked example is the registry module in tools/hosts/cpython/ (capi_registry.hpp): its
// wrappers are GC'd, traverse the object that owns the cache and keep it until tp_dealloc,
// and its suite imports it in subinterpreters, under ASan too.
//
// The rules:
// - Every call holds the GIL (checked by assert() in builds without NDEBUG) of the one
//   interpreter the cache belongs to (Interpreters, below).
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
// Interpreters. A wrapper is an object of the interpreter that made it, so a cache serves one
// interpreter, and a module keeps its cache and its wrapper type in its module state, never in
// a static. A static cache hands interpreter B the wrappers interpreter A made: objects of
// another interpreter, of A's type, freed when A is destroyed. Single-phase init shares them
// even without a static: CPython copies the first module's dict, types included, into the
// module of every later interpreter, without calling init. And CPython 3.11 does call a
// single-phase init again once the interpreter that imported first was destroyed, so a static
// that init rewrites is freed under whatever still points into it (a type spec's name, which
// tp_name keeps: garbage type names, a use-after-free under ASan).
// Per-module state, rather than an ImportError for every interpreter but one: it costs a hit
// nothing (the same probe; the cache is a field read away from the object the call already
// has: PyModule_GetState() of the module, or the object that owns the cache, as in the
// registry module, whose hit and churn rows in docs/BENCHMARKS.md did not move), a module
// imported again after a subinterpreter died is made anew and correct, and a refusal would
// shut the module out of every program that runs subinterpreters (mod_wsgi does by default).
// A module that cannot keep state per interpreter (pybind11 2.10, whose registrations are
// process-wide: tools/hosts/cpython/pybind11_registry.cpp) refuses with ImportError instead,
// from a Py_mod_create slot: CPython runs it at every import, where a single-phase init is
// skipped.
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

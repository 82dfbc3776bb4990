// SPDX-License-Identifier: MIT
// The registry module written against CPython's C API, for any map from native object to
// wrapper (palrt_registry.cpp: palrt's identity cache; plain_registry.cpp: a
// std::unordered_map, what a careful hand-written binding keeps). Python sees:
//
//   reg = <module>.Registry(n)   n native objects, index i holding value i
//   reg.get(i)                   the wrapper of native i: the same object for as long as it
//                                lives (made, and cached, when it has none)
//   reg.cached(i)                that wrapper if it has one, else None; makes nothing
//   reg.on_create                None, or a callable the factory calls with i before it makes
//                                a wrapper (Python code inside the miss path)
//   reg.stats()                  the map's counters, a dict
//   reg.bench_hit(k[, seed]), reg.bench_churn(k[, seed]), reg.bench_churn_empty(k[, seed])
//                                native_registry.hpp's C++ loops over reg.get: ns per op
//   w.index, w.value, w.registry the native's index and value (writable), the registry
//   w.payload                    any object (traversed: cycles through it are collected)
//   weakref.ref(w)               wrappers are weakly referenceable
//
// The Map: find(native*) (a new reference or null, no exception), get_or_create(native*, f)
// (f() makes a wrapper: a new reference or null with an exception; same result contract),
// forget(native*, PyObject*) (tp_dealloc), stats() (a new dict or null). Each Registry owns
// its map, so a map serves the registry's interpreter alone.
//
// Interpreters. The module uses multi-phase init (PEP 489) with per-module state: every
// import, in the main interpreter or in a subinterpreter, makes a module object of its own
// whose Registry and Native types are heap types made for it (PyType_FromModuleAndSpec) and
// kept in its state. So an interpreter
// never sees another's types, nor a wrapper made from them, and nothing made by an
// interpreter that was destroyed is used again. Nothing of the module is static but
// constants, made once and never written: the specs' names are literals, because CPython
// 3.11 keeps a spec's name as the type's tp_name (it copies nothing), and a type made at one
// import lives on beside the types of the next. A Registry holds its own interpreter's
// Native type (registry_object::wrapper_type), so a miss reads no module state, and a hit is
// the map's lookup alone, as before.
// (palrt/cpython/identity_cache.hpp says why per-module state, and not a refusal of a second
// interpreter; its example is this module's wiring at its smallest.)
#pragma once

#include "native_registry.hpp"

#include <new>

#include <structmember.h>

namespace palrt_hosts {

// The names of one module made from capi_module: literals (see above: CPython keeps them).
struct capi_module_names {
  const char* module;  // the import name, "palrt_registry"
  const char* doc;
  const char* variant;        // the module's `variant`
  const char* registry_type;  // "palrt_registry.Registry"
  const char* wrapper_type;   // "palrt_registry.Native"
};

template <class Map, const capi_module_names& Names>
struct capi_module {
  // One per module object: the types exec() made for it.
  struct module_state {
    PyTypeObject* registry_type;  // references; null before exec() and after module_clear()
    PyTypeObject* wrapper_type;
  };
  struct registry_object {
    PyObject_HEAD
    native_registry* natives;
    Map* map;
    PyObject* on_create;         // null or a callable
    PyTypeObject* wrapper_type;  // a reference: its module's Native, which make_wrapper() makes
  };
  struct wrapper_object {
    PyObject_HEAD
    native* target;
    registry_object* registry;  // a reference: the registry and its map outlive every wrapper
    PyObject* payload;
    PyObject* weakrefs;
  };

  // ---- wrappers

  static PyObject* make_wrapper(registry_object* reg, native* n) {
    if (reg->on_create) {
      // Held across the call: the callable may replace reg.on_create.
      PyObject* f = Py_NewRef(reg->on_create);
      PyObject* r = PyObject_CallFunction(f, "n", static_cast<Py_ssize_t>(n->index));
      Py_DECREF(f);
      if (!r) return nullptr;
      Py_DECREF(r);
    }
    wrapper_object* w = PyObject_GC_New(wrapper_object, reg->wrapper_type);
    if (!w) return nullptr;
    w->target = n;
    Py_INCREF(reg);
    w->registry = reg;
    w->payload = nullptr;
    w->weakrefs = nullptr;
    PyObject_GC_Track(w);
    return reinterpret_cast<PyObject*>(w);
  }

  static void wrapper_dealloc(PyObject* self) {
    auto* w = reinterpret_cast<wrapper_object*>(self);
    PyObject_GC_UnTrack(self);
    // A chain of wrappers held through payloads is freed iteratively, not by recursion.
    Py_TRASHCAN_BEGIN(self, wrapper_dealloc)
    // First, while the memory is still this wrapper: a weakref callback below that asks for
    // the native then gets a new wrapper, and nothing can find this one once it is freed.
    w->registry->map->forget(w->target, self);
    if (w->weakrefs) PyObject_ClearWeakRefs(self);
    Py_CLEAR(w->payload);
    registry_object* reg = w->registry;
    PyTypeObject* type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(reg);
    Py_DECREF(type);
    Py_TRASHCAN_END
  }
  static int wrapper_traverse(PyObject* self, visitproc visit, void* arg) {
    auto* w = reinterpret_cast<wrapper_object*>(self);
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(w->registry);
    Py_VISIT(w->payload);
    return 0;
  }
  static int wrapper_clear(PyObject* self) {
    // The registry stays until tp_dealloc, which needs its map.
    Py_CLEAR(reinterpret_cast<wrapper_object*>(self)->payload);
    return 0;
  }
  static PyObject* get_index(PyObject* self, void*) {
    return PyLong_FromSize_t(reinterpret_cast<wrapper_object*>(self)->target->index);
  }
  static PyObject* get_value(PyObject* self, void*) {
    return PyLong_FromLongLong(reinterpret_cast<wrapper_object*>(self)->target->value);
  }
  static int set_value(PyObject* self, PyObject* v, void*) {
    if (!v) {
      PyErr_SetString(PyExc_AttributeError, "value cannot be deleted");
      return -1;
    }
    const long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    reinterpret_cast<wrapper_object*>(self)->target->value = x;
    return 0;
  }
  static PyObject* get_payload(PyObject* self, void*) {
    PyObject* p = reinterpret_cast<wrapper_object*>(self)->payload;
    return Py_NewRef(p ? p : Py_None);
  }
  static int set_payload(PyObject* self, PyObject* v, void*) {
    Py_XSETREF(reinterpret_cast<wrapper_object*>(self)->payload, Py_XNewRef(v));
    return 0;
  }
  static PyObject* get_registry(PyObject* self, void*) {
    return Py_NewRef(reinterpret_cast<PyObject*>(reinterpret_cast<wrapper_object*>(self)->registry));
  }
  static PyObject* wrapper_repr(PyObject* self) {
    auto* w = reinterpret_cast<wrapper_object*>(self);
    return PyUnicode_FromFormat("<%s index=%zu>", Names.wrapper_type, w->target->index);
  }

  // ---- the registry

  static native* native_at(registry_object* reg, PyObject* index) {
    const Py_ssize_t i = PyLong_AsSsize_t(index);
    if (i == -1 && PyErr_Occurred()) return nullptr;
    native* n = i >= 0 ? reg->natives->at(static_cast<std::size_t>(i)) : nullptr;
    if (!n) PyErr_Format(PyExc_IndexError, "no native object %zd (the registry has %zu)", i, reg->natives->size());
    return n;
  }
  static PyObject* get_wrapper(registry_object* reg, native* n) {
    return reg->map->get_or_create(n, [&]() -> PyObject* { return make_wrapper(reg, n); });
  }
  static PyObject* registry_get(PyObject* self, PyObject* index) {
    auto* reg = reinterpret_cast<registry_object*>(self);
    native* n = native_at(reg, index);
    return n ? get_wrapper(reg, n) : nullptr;
  }
  static PyObject* registry_cached(PyObject* self, PyObject* index) {
    auto* reg = reinterpret_cast<registry_object*>(self);
    native* n = native_at(reg, index);
    if (!n) return nullptr;
    PyObject* w = reg->map->find(n);
    return w ? w : Py_NewRef(Py_None);
  }
  static PyObject* registry_stats(PyObject* self, PyObject*) {
    return reinterpret_cast<registry_object*>(self)->map->stats();
  }
  static PyObject* run_loop(PyObject* self, PyObject* args, loop_kind kind) {
    auto* reg = reinterpret_cast<registry_object*>(self);
    unsigned long long iterations = 0, seed = 1;
    if (!parse_loop_args(args, iterations, seed)) return nullptr;
    const double ns = measure_loop(kind, reg->natives->size(), iterations, seed,
                                   [&](std::size_t i) { return get_wrapper(reg, reg->natives->at(i)); });
    return ns < 0 ? nullptr : PyFloat_FromDouble(ns);
  }
  static PyObject* registry_bench_hit(PyObject* self, PyObject* args) { return run_loop(self, args, loop_kind::hit); }
  static PyObject* registry_bench_churn(PyObject* self, PyObject* args) {
    return run_loop(self, args, loop_kind::churn);
  }
  static PyObject* registry_bench_churn_empty(PyObject* self, PyObject* args) {
    return run_loop(self, args, loop_kind::churn_empty);
  }
  static Py_ssize_t registry_len(PyObject* self) {
    return static_cast<Py_ssize_t>(reinterpret_cast<registry_object*>(self)->natives->size());
  }
  static PyObject* get_on_create(PyObject* self, void*) {
    PyObject* f = reinterpret_cast<registry_object*>(self)->on_create;
    return Py_NewRef(f ? f : Py_None);
  }
  static int set_on_create(PyObject* self, PyObject* v, void*) {
    if (v == Py_None) v = nullptr;
    if (v && !PyCallable_Check(v)) {
      PyErr_SetString(PyExc_TypeError, "on_create must be callable or None");
      return -1;
    }
    Py_XSETREF(reinterpret_cast<registry_object*>(self)->on_create, Py_XNewRef(v));
    return 0;
  }

  static PyObject* registry_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
    static const char* keywords[] = {"n", nullptr};
    Py_ssize_t n = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n", const_cast<char**>(keywords), &n)) return nullptr;
    if (n < 0) {
      PyErr_SetString(PyExc_ValueError, "a registry holds n >= 0 native objects");
      return nullptr;
    }
    // Registry cannot be subclassed: `type` is the one exec() made, whose module's state
    // holds the Native type of the same module object, and so of the same interpreter.
    auto* state = static_cast<module_state*>(PyType_GetModuleState(type));
    if (!state) return nullptr;
    if (!state->wrapper_type) {
      PyErr_Format(PyExc_RuntimeError, "%s: its module has been cleared", Names.registry_type);
      return nullptr;
    }
    auto* reg = reinterpret_cast<registry_object*>(type->tp_alloc(type, 0));
    if (!reg) return nullptr;
    reg->wrapper_type = reinterpret_cast<PyTypeObject*>(Py_NewRef(state->wrapper_type));
    try {
      reg->natives = new native_registry(static_cast<std::size_t>(n));
      reg->map = new Map();
    } catch (const std::bad_alloc&) {
      Py_DECREF(reg);
      return PyErr_NoMemory();
    }
    return reinterpret_cast<PyObject*>(reg);
  }
  static void registry_dealloc(PyObject* self) {
    auto* reg = reinterpret_cast<registry_object*>(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(reg->on_create);
    delete reg->map;  // every wrapper is gone: each held a reference to the registry
    delete reg->natives;
    Py_XDECREF(reg->wrapper_type);
    PyTypeObject* type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
  }
  static int registry_traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(reinterpret_cast<registry_object*>(self)->on_create);
    Py_VISIT(reinterpret_cast<registry_object*>(self)->wrapper_type);
    return 0;
  }
  static int registry_clear(PyObject* self) {
    // The Native type stays until tp_dealloc, as the map does: code that a deallocation runs
    // may still ask a registry the collector cleared for a wrapper. The cycles through it
    // (type -> module -> ...) are broken by the type's and the module's own tp_clear.
    Py_CLEAR(reinterpret_cast<registry_object*>(self)->on_create);
    return 0;
  }

  // ---- the module
  //
  // The tables are constants, shared by every module object; PyType_FromModuleAndSpec copies
  // the slots it needs, and keeps the spec's name (a literal) as tp_name.

  static inline PyGetSetDef wrapper_getset[] = {
      {"index", get_index, nullptr, "the native object's index", nullptr},
      {"value", get_value, set_value, "the native object's value", nullptr},
      {"payload", get_payload, set_payload, "any object, held by the wrapper", nullptr},
      {"registry", get_registry, nullptr, "the registry of the native object", nullptr},
      {nullptr, nullptr, nullptr, nullptr, nullptr}};
  static inline PyMemberDef wrapper_members[] = {
      {"__weaklistoffset__", T_PYSSIZET, offsetof(wrapper_object, weakrefs), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr}};
  static inline PyType_Slot wrapper_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(wrapper_dealloc)},
                                               {Py_tp_traverse, reinterpret_cast<void*>(wrapper_traverse)},
                                               {Py_tp_clear, reinterpret_cast<void*>(wrapper_clear)},
                                               {Py_tp_getset, wrapper_getset},
                                               {Py_tp_members, wrapper_members},
                                               {Py_tp_repr, reinterpret_cast<void*>(wrapper_repr)},
                                               {0, nullptr}};
  static inline PyType_Spec wrapper_spec = {Names.wrapper_type, sizeof(wrapper_object), 0,
                                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                            wrapper_slots};

  static inline PyMethodDef registry_methods[] = {
      {"get", registry_get, METH_O, "the wrapper of native i (made if it has none)"},
      {"cached", registry_cached, METH_O, "the wrapper of native i, or None; makes nothing"},
      {"stats", registry_stats, METH_NOARGS, "the map's counters"},
      {"bench_hit", registry_bench_hit, METH_VARARGS, "ns per get() of a held wrapper, in a C++ loop"},
      {"bench_churn", registry_bench_churn, METH_VARARGS, "ns per wrapper dropped and made again, in a C++ loop"},
      {"bench_churn_empty", registry_bench_churn_empty, METH_VARARGS,
       "ns per wrapper made for a native with none and dropped at once, in a C++ loop"},
      {nullptr, nullptr, 0, nullptr}};
  static inline PyGetSetDef registry_getset[] = {
      {"on_create", get_on_create, set_on_create, "called with i before a wrapper is made", nullptr},
      {nullptr, nullptr, nullptr, nullptr, nullptr}};
  static inline PyType_Slot registry_slots[] = {{Py_tp_new, reinterpret_cast<void*>(registry_new)},
                                                {Py_tp_dealloc, reinterpret_cast<void*>(registry_dealloc)},
                                                {Py_tp_traverse, reinterpret_cast<void*>(registry_traverse)},
                                                {Py_tp_clear, reinterpret_cast<void*>(registry_clear)},
                                                {Py_tp_methods, registry_methods},
                                                {Py_tp_getset, registry_getset},
                                                {Py_mp_length, reinterpret_cast<void*>(registry_len)},
                                                {0, nullptr}};
  static inline PyType_Spec registry_spec = {Names.registry_type, sizeof(registry_object), 0,
                                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, registry_slots};

  static module_state* state_of(PyObject* module) noexcept {
    return static_cast<module_state*>(PyModule_GetState(module));
  }
  // Py_mod_exec: the module object's own types. What a failed exec() made is dropped by
  // module_free() when CPython discards the module object.
  static int module_exec(PyObject* module) {
    module_state* state = state_of(module);
    state->wrapper_type = reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &wrapper_spec, nullptr));
    if (!state->wrapper_type) return -1;
    state->registry_type = reinterpret_cast<PyTypeObject*>(PyType_FromModuleAndSpec(module, &registry_spec, nullptr));
    if (!state->registry_type) return -1;
    if (PyModule_AddObjectRef(module, "Native", reinterpret_cast<PyObject*>(state->wrapper_type)) < 0 ||
        PyModule_AddObjectRef(module, "Registry", reinterpret_cast<PyObject*>(state->registry_type)) < 0 ||
        PyModule_AddStringConstant(module, "variant", Names.variant) < 0) {
      return -1;
    }
    return 0;
  }
  static int module_traverse(PyObject* module, visitproc visit, void* arg) {
    module_state* state = state_of(module);
    Py_VISIT(state->registry_type);
    Py_VISIT(state->wrapper_type);
    return 0;
  }
  static int module_clear(PyObject* module) {
    module_state* state = state_of(module);
    Py_CLEAR(state->registry_type);
    Py_CLEAR(state->wrapper_type);
    return 0;
  }
  static void module_free(void* module) { module_clear(static_cast<PyObject*>(module)); }

  static inline PyModuleDef_Slot module_slots[] = {{Py_mod_exec, reinterpret_cast<void*>(module_exec)}, {0, nullptr}};
  static inline PyModuleDef definition = {PyModuleDef_HEAD_INIT, Names.module, Names.doc,
                                          sizeof(module_state),  nullptr,      module_slots,
                                          module_traverse,       module_clear, module_free};

  // PyInit_<module>: the definition; CPython makes a module object from it at each import.
  static PyObject* init() { return PyModuleDef_Init(&definition); }
};

}  // namespace palrt_hosts

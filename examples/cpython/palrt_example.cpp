// SPDX-License-Identifier: MIT
// A CPython extension module on palrt::cpython::identity_cache (the header's example, made
// whole): natives(n) makes n native objects; wrapper_of(i) hands native i to Python, the
// same Python object for as long as that object lives. Built against an installed palrt
// through palrt-cpython.pc, with libpalrt.so shipped beside the module (docs/LINKING.md, "One
// libpalrt.so for a process of many modules"); scripts/test.sh builds it with the two lines
// the README shows and runs check.py with it.
#include <palrt/cpython/identity_cache.hpp>

#include <memory>
#include <vector>

namespace {

struct native {
  int index;
};

struct wrapper {
  PyObject_HEAD
  const native* target;
};

struct module_state {
  static inline PyTypeObject* wrapper_type = nullptr;
  static inline palrt::cpython::identity_cache cache;
  static inline std::vector<std::unique_ptr<native>> natives;
};

// The wrapper of `n`: a new reference, or null with an exception set.
PyObject* wrapper_of(const native* n) {
  return module_state::cache.get_or_create(n, [](const void* target) -> PyObject* {
    wrapper* w = PyObject_New(wrapper, module_state::wrapper_type);
    if (w) w->target = static_cast<const native*>(target);
    return reinterpret_cast<PyObject*>(w);
  });
}

// forget() first, while the memory is still this wrapper.
void wrapper_dealloc(PyObject* self) {
  module_state::cache.forget(reinterpret_cast<wrapper*>(self)->target, self);
  Py_TYPE(self)->tp_free(self);
}

PyObject* wrapper_index(PyObject* self, void*) {
  return PyLong_FromLong(reinterpret_cast<wrapper*>(self)->target->index);
}

PyGetSetDef wrapper_getset[] = {
    {"index", wrapper_index, nullptr, "the native object's index", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot wrapper_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(wrapper_dealloc)},
    {Py_tp_getset, wrapper_getset},
    {0, nullptr},
};

PyType_Spec wrapper_spec = {"palrt_example.Wrapper", sizeof(wrapper), 0, Py_TPFLAGS_DEFAULT, wrapper_slots};

PyObject* natives(PyObject*, PyObject* arg) {
  const long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 0 || n > 1000000) {
    PyErr_SetString(PyExc_ValueError, "natives(n): 0 <= n <= 1000000");
    return nullptr;
  }
  // Natives outlive their wrappers: only added, never freed while the module lives.
  while (module_state::natives.size() < static_cast<std::size_t>(n))
    module_state::natives.push_back(std::make_unique<native>(native{static_cast<int>(module_state::natives.size())}));
  Py_RETURN_NONE;
}

PyObject* wrapper_of_index(PyObject*, PyObject* arg) {
  const long i = PyLong_AsLong(arg);
  if (i == -1 && PyErr_Occurred()) return nullptr;
  if (i < 0 || static_cast<std::size_t>(i) >= module_state::natives.size()) {
    PyErr_SetString(PyExc_IndexError, "wrapper_of(i): no such native object");
    return nullptr;
  }
  return wrapper_of(module_state::natives[static_cast<std::size_t>(i)].get());
}

PyObject* cached(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(module_state::cache.counters().entries); }

PyMethodDef methods[] = {
    {"natives", natives, METH_O, "natives(n): make native objects 0 .. n-1"},
    {"wrapper_of", wrapper_of_index, METH_O, "wrapper_of(i): the wrapper of native object i"},
    {"cached", cached, METH_NOARGS, "cached(): how many wrappers the identity cache holds"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "palrt_example",
                          "palrt::cpython::identity_cache, made whole",
                          -1,
                          methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_palrt_example() {
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  PyObject* type = PyType_FromSpec(&wrapper_spec);
  if (!type || PyModule_AddObject(m, "Wrapper", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return nullptr;
  }
  module_state::wrapper_type = reinterpret_cast<PyTypeObject*>(type);  // the module holds it
  return m;
}

// SPDX-License-Identifier: MIT
// pybind11_registry: the registry module bound with pybind11, which keeps the wrapper of every
// native it handed out in its registered_instances (a std::unordered_multimap from the
// native's address to the instance), removed when the instance is deallocated. palrt's peer:
// the same natives, the same Python surface as capi_registry.hpp (the payload is a dynamic
// attribute, hence a GC'd instance as the C API modules' wrappers are).
//
// Returned with return_value_policy::reference, as a binding of objects the native side owns
// does: the natives live in the Registry, which the caller keeps alive while its wrappers are
// used (reference_internal would add a keep-alive record per call, which no binding of a
// hot lookup can afford).
//
// The main interpreter only: an import in a subinterpreter raises ImportError. pybind11 2.10
// (Debian 12's) keeps its registered types and instances process-wide, made by whichever
// interpreter imported first, so a subinterpreter would be handed the main interpreter's
// wrappers, and after a first import in a subinterpreter that was destroyed, the main
// interpreter would use that interpreter's dead objects (it hangs). The check must run at
// every import, which a single-phase module's does not (CPython copies its first module's
// dict into every later one): the module is multi-phase (PEP 489) and checks in its
// Py_mod_create, before pybind11 is touched; pybind11's bindings then run once per process.
#include <pybind11/pybind11.h>

#include "native_registry.hpp"

namespace py = pybind11;
using palrt_hosts::native;
using palrt_hosts::native_registry;

namespace {

native* native_at(const native_registry& reg, std::size_t i) {
  native* n = reg.at(i);
  if (!n) throw py::index_error("no native object " + std::to_string(i));
  return n;
}

// What get() returns to Python: pybind11 finds the instance already registered for the
// address, or makes one and registers it.
PyObject* wrapper_of(native* n) { return py::cast(n, py::return_value_policy::reference).release().ptr(); }

double run_loop(const native_registry& reg, palrt_hosts::loop_kind kind, unsigned long long iterations,
                unsigned long long seed) {
  const double ns = palrt_hosts::measure_loop(kind, reg.size(), iterations, seed, [&](std::size_t i) -> PyObject* {
    try {
      return wrapper_of(reg.at(i));
    } catch (py::error_already_set& e) {
      e.restore();
      return nullptr;
    }
  });
  if (ns < 0) throw py::error_already_set();
  return ns;
}

// The module's contents: what PYBIND11_MODULE's body was.
void bind(py::module_& m) {
  m.doc() = "A native object registry bound with pybind11 (registered_instances keeps the wrappers)";
  m.attr("variant") = "pybind11";
  py::class_<native>(m, "Native", py::dynamic_attr())
      .def_readonly("index", &native::index)
      .def_readwrite("value", &native::value)
      .def("__repr__",
           [](const native& n) { return "<pybind11_registry.Native index=" + std::to_string(n.index) + ">"; });
  py::class_<native_registry>(m, "Registry")
      .def(py::init<std::size_t>(), py::arg("n"))
      .def("__len__", &native_registry::size)
      .def(
          "get", [](const native_registry& reg, std::size_t i) { return native_at(reg, i); },
          py::return_value_policy::reference)
      .def(
          "bench_hit",
          [](const native_registry& reg, unsigned long long k, unsigned long long seed) {
            return run_loop(reg, palrt_hosts::loop_kind::hit, k, seed);
          },
          py::arg("k"), py::arg("seed") = 1)
      .def(
          "bench_churn",
          [](const native_registry& reg, unsigned long long k, unsigned long long seed) {
            return run_loop(reg, palrt_hosts::loop_kind::churn, k, seed);
          },
          py::arg("k"), py::arg("seed") = 1)
      .def(
          "bench_churn_empty",
          [](const native_registry& reg, unsigned long long k, unsigned long long seed) {
            return run_loop(reg, palrt_hosts::loop_kind::churn_empty, k, seed);
          },
          py::arg("k"), py::arg("seed") = 1);
}

// Py_mod_create: the module object of the main interpreter. The first import makes it with
// pybind11 and binds the types; a later one (after the first was dropped from sys.modules)
// gets a module of its own with the same contents, as CPython gives a single-phase module.
PyObject* create_module(PyObject* spec, PyModuleDef*) {
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
    PyErr_SetString(PyExc_ImportError,
                    "pybind11_registry cannot be imported in a subinterpreter: pybind11 2.10 keeps its types and "
                    "instances process-wide, so one interpreter would be handed another's wrappers");
    return nullptr;
  }
  static PyObject* contents = nullptr;  // the first module's dict, for the life of the process
  if (contents) {
    PyObject* name = PyObject_GetAttrString(spec, "name");
    if (!name) return nullptr;
    PyObject* m = PyModule_NewObject(name);
    Py_DECREF(name);
    if (m && PyDict_Update(PyModule_GetDict(m), contents) < 0) Py_CLEAR(m);
    return m;
  }
  PYBIND11_ENSURE_INTERNALS_READY
  static py::module_::module_def pybind11_definition;
  try {
    auto m = py::module_::create_extension_module("pybind11_registry", nullptr, &pybind11_definition);
    bind(m);
    contents = PyDict_Copy(PyModule_GetDict(m.ptr()));
    if (!contents) return nullptr;
    return m.release().ptr();
  }
  PYBIND11_CATCH_INIT_EXCEPTIONS
}

}  // namespace

PyMODINIT_FUNC PyInit_pybind11_registry() {
  PYBIND11_CHECK_PYTHON_VERSION
  static PyModuleDef_Slot slots[] = {{Py_mod_create, reinterpret_cast<void*>(create_module)}, {0, nullptr}};
  static PyModuleDef definition = {
      PyModuleDef_HEAD_INIT, "pybind11_registry", nullptr, 0, nullptr, slots, nullptr, nullptr, nullptr};
  return PyModuleDef_Init(&definition);
}

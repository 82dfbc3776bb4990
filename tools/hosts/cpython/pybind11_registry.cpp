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
PyObject* wrapper_of(native* n) {
  return py::cast(n, py::return_value_policy::reference).release().ptr();
}

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

}  // namespace

PYBIND11_MODULE(pybind11_registry, m) {
  m.doc() = "A native object registry bound with pybind11 (registered_instances keeps the wrappers)";
  m.attr("variant") = "pybind11";
  py::class_<native>(m, "Native", py::dynamic_attr())
      .def_readonly("index", &native::index)
      .def_readwrite("value", &native::value)
      .def("__repr__", [](const native& n) { return "<pybind11_registry.Native index=" + std::to_string(n.index) + ">"; });
  py::class_<native_registry>(m, "Registry")
      .def(py::init<std::size_t>(), py::arg("n"))
      .def("__len__", &native_registry::size)
      .def("get", [](const native_registry& reg, std::size_t i) { return native_at(reg, i); },
           py::return_value_policy::reference)
      .def("bench_hit",
           [](const native_registry& reg, unsigned long long k, unsigned long long seed) {
             return run_loop(reg, palrt_hosts::loop_kind::hit, k, seed);
           },
           py::arg("k"), py::arg("seed") = 1)
      .def("bench_churn",
           [](const native_registry& reg, unsigned long long k, unsigned long long seed) {
             return run_loop(reg, palrt_hosts::loop_kind::churn, k, seed);
           },
           py::arg("k"), py::arg("seed") = 1);
}

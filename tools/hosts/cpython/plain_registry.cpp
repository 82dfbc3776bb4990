// SPDX-License-Identifier: MIT
// plain_registry: the registry module (capi_registry.hpp) with what a careful hand-written
// binding keeps, a std::unordered_map from native to wrapper, the entry removed in
// tp_dealloc. palrt's baseline: the same module, the same Python objects, another map.
#include "capi_registry.hpp"

#include <unordered_map>

namespace {

struct plain_map {
  std::unordered_map<const void*, PyObject*> wrappers;

  PyObject* find(const palrt_hosts::native* n) const noexcept {
    auto it = wrappers.find(n);
    // A wrapper whose count is zero is being destroyed (its tp_dealloc deferred by the
    // trashcan, or not yet at forget()): not to be handed out.
    if (it == wrappers.end() || Py_REFCNT(it->second) <= 0) return nullptr;
    return Py_NewRef(it->second);
  }
  template <class Make>
  PyObject* get_or_create(palrt_hosts::native* n, Make&& make) noexcept {
    if (PyObject* hit = find(n)) return hit;
    PyObject* made = make();  // may run Python code, which may have cached a wrapper meanwhile
    if (!made) return nullptr;
    try {
      auto [it, inserted] = wrappers.try_emplace(n, made);
      if (!inserted) {
        if (Py_REFCNT(it->second) > 0) {
          Py_DECREF(made);
          return Py_NewRef(it->second);
        }
        it->second = made;  // replaces a dying wrapper
      }
    } catch (const std::bad_alloc&) {
      Py_DECREF(made);
      return PyErr_NoMemory();
    }
    return made;
  }
  void forget(const palrt_hosts::native* n, PyObject* wrapper) noexcept {
    auto it = wrappers.find(n);
    if (it != wrappers.end() && it->second == wrapper) wrappers.erase(it);
  }
  PyObject* stats() const {
    return Py_BuildValue("{s:n,s:n}", "entries", static_cast<Py_ssize_t>(wrappers.size()), "buckets",
                         static_cast<Py_ssize_t>(wrappers.bucket_count()));
  }
};

constexpr palrt_hosts::capi_module_names names = {"plain_registry",
                                                  "A native object registry whose wrappers a std::unordered_map keeps",
                                                  "plain", "plain_registry.Registry", "plain_registry.Native"};
using module = palrt_hosts::capi_module<plain_map, names>;

}  // namespace

PyMODINIT_FUNC PyInit_plain_registry() { return module::init(); }

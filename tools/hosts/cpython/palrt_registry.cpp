// SPDX-License-Identifier: MIT
// palrt_registry: the registry module (capi_registry.hpp) with palrt's identity cache, through
// the CPython adapter (palrt/cpython/identity_cache.hpp): the wrapper is the Python object,
// its entry removed in tp_dealloc.
#include "capi_registry.hpp"

#include "palrt/cpython/identity_cache.hpp"

namespace {

struct palrt_map {
  palrt::cpython::identity_cache cache;

  PyObject* find(const palrt_hosts::native* n) const noexcept { return cache.find(n); }
  template <class Make>
  PyObject* get_or_create(palrt_hosts::native* n, Make&& make) noexcept {
    return cache.get_or_create(n, [&](const void*) { return make(); });
  }
  void forget(const palrt_hosts::native* n, PyObject* wrapper) noexcept { cache.forget(n, wrapper); }

  PyObject* stats() const {
    palrt::interop::host_cache_counters c;
    try {
      c = cache.counters();
    } catch (const std::bad_alloc&) {
      return PyErr_NoMemory();
    }
    return Py_BuildValue(
        "{s:n,s:n,s:n,s:n,s:K,s:K,s:K,s:K,s:K,s:K,s:n}", "entries", static_cast<Py_ssize_t>(c.entries), "tombstones",
        static_cast<Py_ssize_t>(c.tombstones), "slots", static_cast<Py_ssize_t>(c.slots), "bytes",
        static_cast<Py_ssize_t>(c.bytes), "inserted", static_cast<unsigned long long>(c.inserted), "races_lost",
        static_cast<unsigned long long>(c.races_lost), "dead_replaced",
        static_cast<unsigned long long>(c.dead_replaced), "erased", static_cast<unsigned long long>(c.erased),
        "reused_slots", static_cast<unsigned long long>(c.reused_slots), "rebuilds",
        static_cast<unsigned long long>(c.rebuilds), "retired_tables", static_cast<Py_ssize_t>(c.retired_tables));
  }
};

constexpr palrt_hosts::capi_module_names names = {
    "palrt_registry", "A native object registry whose wrappers palrt's identity cache keeps", "palrt",
    "palrt_registry.Registry", "palrt_registry.Native"};
using module = palrt_hosts::capi_module<palrt_map, names>;

}  // namespace

PyMODINIT_FUNC PyInit_palrt_registry() { return module::init(); }

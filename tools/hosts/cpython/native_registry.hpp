// SPDX-License-Identifier: MIT
// The native side of the CPython host: a registry of native objects that Python code asks for
// by index, and the C++ loops that measure a module's own lookup (native object -> its Python
// wrapper) without Python's call overhead. Shared by the three modules the host builds: palrt's
// identity cache, a plain std::unordered_map and pybind11's registered_instances.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace palrt_hosts {

// A native object: what a binding wraps. Its address is its identity.
struct native {
  std::size_t index = 0;
  std::int64_t value = 0;
};

// The natives, made once and never moved, so their addresses stay valid.
class native_registry {
 public:
  explicit native_registry(std::size_t n) : natives_(std::make_unique<native[]>(n)), size_(n) {
    for (std::size_t i = 0; i < n; ++i) natives_[i] = native{i, static_cast<std::int64_t>(i)};
  }
  std::size_t size() const noexcept { return size_; }
  native* at(std::size_t i) const noexcept { return i < size_ ? &natives_[i] : nullptr; }

 private:
  std::unique_ptr<native[]> natives_;
  std::size_t size_;
};

// The order a loop visits the natives in: a permutation of 0..n-1 (random, so that a large
// registry is read the way a program with many objects reads it, not in address order).
inline std::vector<std::size_t> visit_order(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 random(seed);
  std::shuffle(order.begin(), order.end(), random);
  return order;
}

inline std::uint64_t monotonic_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

// The measured loops, for a module whose lookup is `get(i)`: the wrapper of native i, a new
// reference (made if it has none), or null with a Python exception set. They return the ns
// per operation, or a negative value with the exception set.
//   hit:         get() of a held wrapper, then its reference dropped.
//   churn:       a wrapper dropped (its last reference: the module's tp_dealloc removes the
//                entry) and its native asked for again (a new wrapper, a new entry).
//   churn_empty: get() of a native with no wrapper (a new wrapper, a new entry), then its
//                reference dropped (the entry removed): nothing is held between operations,
//                as in a program that wraps a native for one call and lets it go.
// hit and churn hold a wrapper for every native first, as a program holding n objects does.
enum class loop_kind { hit, churn, churn_empty };

template <class Get>
double measure_loop(loop_kind kind, std::size_t n, std::uint64_t iterations, std::uint64_t seed, Get&& get) {
  std::vector<PyObject*> held(n, nullptr);
  auto drop_all = [&] {
    for (PyObject*& w : held) Py_CLEAR(w);
  };
  for (std::size_t i = 0; i < n && kind != loop_kind::churn_empty; ++i) {
    if (!(held[i] = get(i))) {
      drop_all();
      return -1;
    }
  }
  const std::vector<std::size_t> order = visit_order(n, seed);
  std::size_t next = 0;
  bool failed = false;
  const std::uint64_t start = monotonic_ns();
  if (kind == loop_kind::hit || kind == loop_kind::churn_empty) {
    for (std::uint64_t k = 0; k < iterations; ++k) {
      PyObject* w = get(order[next]);
      if (!w) {
        failed = true;
        break;
      }
      Py_DECREF(w);
      if (++next == n) next = 0;
    }
  } else {
    for (std::uint64_t k = 0; k < iterations; ++k) {
      const std::size_t i = order[next];
      Py_DECREF(held[i]);
      if (!(held[i] = get(i))) {
        failed = true;
        break;
      }
      if (++next == n) next = 0;
    }
  }
  const std::uint64_t elapsed = monotonic_ns() - start;
  drop_all();
  if (failed) return -1;
  return iterations ? static_cast<double>(elapsed) / static_cast<double>(iterations) : 0.0;
}

// Parses the bench_* loops' (iterations, seed) arguments.
inline bool parse_loop_args(PyObject* args, unsigned long long& iterations, unsigned long long& seed) {
  seed = 1;
  return PyArg_ParseTuple(args, "K|K", &iterations, &seed) != 0;
}

}  // namespace palrt_hosts

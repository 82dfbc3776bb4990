// SPDX-License-Identifier: MIT
// What the handle table's suites share: stand-ins for a host's objects (distinct, aligned
// addresses, with a liveness flag a test's is_alive reads) and the count of handles of every
// kind in a table's counters.
#pragma once

#include <cstddef>

#include "palrt/gc/handle_table.hpp"

namespace palrt::testing {

struct cell {
  alignas(16) int id = 0;
  bool alive = true;
};

inline std::size_t total(const palrt::gc::handle_counters& c) {
  std::size_t n = 0;
  for (std::size_t k : c.handles) n += k;
  return n;
}

}  // namespace palrt::testing

// SPDX-License-Identifier: MIT
// The errno a call throws as palrt::sync::sync_error, for the waits' and the sync manager's
// bad-input tests.
#pragma once

#include <functional>
#include <string>

#include "palrt/sync/handle.hpp"

namespace palrt::testing {

// The sync_error's code, or 0 if the call throws nothing (any other exception propagates and
// fails the test); its message in *message if asked for.
inline int error_of(const std::function<void()>& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const sync::sync_error& e) {
    if (message) *message = e.what();
    return e.code().value();
  }
  return 0;
}

}  // namespace palrt::testing

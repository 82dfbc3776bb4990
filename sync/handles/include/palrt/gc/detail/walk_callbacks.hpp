// SPDX-License-Identifier: MIT
// Not API: how the handle table's walks take a host's callables (any lambda or function
// object) while the walks stay out of line: as the callable's address and a typed
// trampoline, with no std::function (no allocation, no copy of the callable), which a walk
// with the world stopped needs. Used by handle_table.hpp and handle_walk.hpp; may change in
// any release.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <memory>
#include <span>
#include <type_traits>

namespace palrt::gc {

class handle_slot;

namespace detail {

using predicate_fn = bool (*)(void*, void*);
using visit_fn = void (*)(void*, void*);
using cleared_fn = void (*)(void*, void*, void*);
using batch_fn = void (*)(void*, std::span<void* const>, std::span<bool>);
using slot_fn = void (*)(void*, handle_slot);
using forward_fn = void* (*)(void*, void*);

template <class F>
void* erase(F& f) noexcept {
  static_assert(!std::is_function_v<F>,
                "palrt::gc::handle_table: pass a lambda or function object, not a function's name "
                "(wrap it: [](auto... a) { return f(a...); })");
  return const_cast<void*>(static_cast<const void*>(std::addressof(f)));
}
template <class F>
bool call_predicate(void* f, void* target) {
  return (*static_cast<F*>(f))(target);
}
template <class F>
void call_visit(void* f, void* target) {
  (*static_cast<F*>(f))(target);
}
template <class F>
void call_cleared(void* f, void* target, void* secondary) {
  (*static_cast<F*>(f))(target, secondary);
}
template <class F>
void call_batch(void* f, std::span<void* const> targets, std::span<bool> alive) {
  (*static_cast<F*>(f))(targets, alive);
}
template <class F, class Slot = handle_slot>  // Slot: complete only where it is called
void call_slot(void* f, Slot slot) {
  (*static_cast<F*>(f))(slot);
}
template <class F>
void* call_forward(void* f, void* target) {
  return (*static_cast<F*>(f))(target);
}

}  // namespace detail
}  // namespace palrt::gc

// SPDX-License-Identifier: MIT
// palrt::gc::owned_handle: one handle of a handle_table, released when the owner is done.
//
// The RAII owner for hosts that work with raw handles (a host GC's own wrappers); the
// embedded collector's typed wrappers (typed_handles.hpp) build on it. Move-only: a handle
// has exactly one owner, so it is released exactly once. Not thread-safe itself (like any
// value type); the table it refers to is.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <utility>

#include "palrt/gc/handle_table.hpp"

namespace palrt::gc {

// Owns one handle: releases it when destroyed. Move-only. The typed wrappers build on it.
class owned_handle {
 public:
  owned_handle() noexcept = default;
  owned_handle(handle_table& table, handle_kind kind, void* target, void* secondary = nullptr)
      : table_(&table), handle_(table.allocate(kind, target, secondary)) {}
  owned_handle(owned_handle&& other) noexcept : table_(other.table_), handle_(std::exchange(other.handle_, handle{})) {}
  owned_handle& operator=(owned_handle&& other) noexcept {
    if (this != &other) {
      reset();
      table_ = other.table_;
      handle_ = std::exchange(other.handle_, handle{});
    }
    return *this;
  }
  ~owned_handle() { reset(); }

  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  handle get() const noexcept { return handle_; }
  handle_table* table() const noexcept { return table_; }
  void* target() const noexcept { return handle_ ? handle_table::target(handle_) : nullptr; }
  // Releases the handle now; returns what release() returned (null if there was none).
  void* reset() noexcept { return handle_ ? table_->release(std::exchange(handle_, handle{})) : nullptr; }

 private:
  handle_table* table_ = nullptr;
  handle handle_;
};

}  // namespace palrt::gc

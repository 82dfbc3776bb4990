// SPDX-License-Identifier: MIT
// Typed handles to the embedded collector's objects: strong_handle<T>, weak_handle<T> and
// dependent_handle<P, S>. Each owns one handle of the table of its target's collector (so
// the collector that frees the target is the one that sweeps the handle) and releases it
// when destroyed. Move-only; a handle object is not synchronised (like any value type), the
// table behind it is.
//
// Example:
//   struct node : palrt::gc::object { int value = 0; };        // object.hpp
//   ref<node> n = make_object<node>(collector);
//   weak_handle<node> w(n);                 // weak_short by default
//   if (ref<node> live = w.try_get()) { /* ... */ }  // empty once n died, even before a collection
//
// strong_handle  holds a reference: its target stays alive while the handle does.
// weak_handle    holds none. try_get() returns a reference if the target is alive, else
//                empty; it never revives a dead object (zero is terminal) and never touches
//                freed memory (it reads under a read section). weak_short is cleared when
//                the target is found dead; weak_long only after its finalizer ran (and not
//                if the finalizer resurrected it).
// dependent_handle  a weak primary that holds a reference to a secondary while the primary
//                lives: when a collection finds the primary dead it clears the handle and
//                drops the secondary. (A secondary that refers back to its primary keeps
//                both alive forever: reference counts cannot see that cycle.)
//
// Constructors throw handle_allocation_error (handle_table.hpp) and take nothing over then.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <stdexcept>
#include <utility>

#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/object.hpp"
#include "palrt/gc/owned_handle.hpp"
#include "palrt/gc/read_section.hpp"

namespace palrt::gc {

namespace detail {
// A reference to the target of `h` if it is alive; empty if cleared or dead.
template <class T>
ref<T> try_get_target(const owned_handle& h) {
  if (!h) return {};
  read_section section;
  auto* target = static_cast<T*>(h.target());
  if (!target || !object_access::try_add_ref(*target)) return {};
  return ref<T>::adopt(target);
}
}  // namespace detail

template <class T>
class strong_handle {
 public:
  strong_handle() noexcept = default;
  explicit strong_handle(const ref<T>& target) {
    if (!target) return;
    handle_ = owned_handle(detail::object_access::table_of(*target), handle_kind::strong, target.get());
    detail::object_access::add_ref(*target);
  }
  strong_handle(strong_handle&&) noexcept = default;
  strong_handle& operator=(strong_handle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::move(other.handle_);
    }
    return *this;
  }
  ~strong_handle() { reset(); }

  // The target, alive as long as this handle holds it.
  T* get() const noexcept { return static_cast<T*>(handle_.target()); }
  [[nodiscard]] ref<T> lock() const noexcept {
    T* t = get();
    if (t) detail::object_access::add_ref(*t);
    return ref<T>::adopt(t);
  }
  void reset() noexcept {
    if (auto* t = static_cast<T*>(handle_.reset())) detail::object_access::release(*t);
  }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  handle raw() const noexcept { return handle_.get(); }

 private:
  owned_handle handle_;
};

template <class T>
class weak_handle {
 public:
  weak_handle() noexcept = default;
  // kind: handle_kind::weak_short or handle_kind::weak_long (else std::invalid_argument).
  explicit weak_handle(const ref<T>& target, handle_kind kind = handle_kind::weak_short) {
    if (kind != handle_kind::weak_short && kind != handle_kind::weak_long)
      throw std::invalid_argument("palrt: weak_handle: the kind must be weak_short or weak_long");
    if (target) handle_ = owned_handle(detail::object_access::table_of(*target), kind, target.get());
  }
  weak_handle(weak_handle&&) noexcept = default;
  weak_handle& operator=(weak_handle&&) noexcept = default;

  [[nodiscard]] ref<T> try_get() const { return detail::try_get_target<T>(handle_); }
  // true once a collection cleared the handle (or it never had a target). A dead target that
  // no collection has seen yet still counts as not cleared: try_get() tells.
  bool cleared() const noexcept { return handle_.target() == nullptr; }
  void reset() noexcept { handle_.reset(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  handle raw() const noexcept { return handle_.get(); }

 private:
  owned_handle handle_;
};

template <class P, class S>
class dependent_handle {
 public:
  dependent_handle() noexcept = default;
  // Both must be alive objects of the same collector (std::invalid_argument otherwise).
  dependent_handle(const ref<P>& primary, const ref<S>& secondary) {
    if (!primary || !secondary)
      throw std::invalid_argument("palrt: dependent_handle: primary and secondary are required");
    handle_table& table = detail::object_access::table_of(*primary);
    if (&detail::object_access::table_of(*secondary) != &table)
      throw std::invalid_argument("palrt: dependent_handle: primary and secondary belong to different collectors");
    handle_ = owned_handle(table, handle_kind::dependent, primary.get(), secondary.get());
    detail::object_access::add_ref(*secondary);
  }
  dependent_handle(dependent_handle&&) noexcept = default;
  dependent_handle& operator=(dependent_handle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::move(other.handle_);
    }
    return *this;
  }
  ~dependent_handle() { reset(); }

  [[nodiscard]] ref<P> try_get_primary() const { return detail::try_get_target<P>(handle_); }
  // The secondary while the primary lives; empty once the primary is dead.
  [[nodiscard]] ref<S> try_get_secondary() const {
    if (!handle_) return {};
    read_section section;
    ref<P> primary = detail::try_get_target<P>(handle_);
    if (!primary) return {};
    // The primary is alive, so no sweep clears this handle: it still holds the secondary.
    auto* secondary = static_cast<S*>(handle_.table()->secondary(handle_.get()));
    if (!secondary || !detail::object_access::try_add_ref(*secondary)) return {};
    return ref<S>::adopt(secondary);
  }
  void reset() noexcept {
    if (!handle_) return;
    // Read before releasing (the slot may be reused after). If a sweep cleared the primary
    // meanwhile, release() returns null and the sweep dropped the secondary instead.
    auto* secondary = static_cast<S*>(handle_.table()->secondary(handle_.get()));
    if (handle_.reset() && secondary) detail::object_access::release(*secondary);
  }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  handle raw() const noexcept { return handle_.get(); }

 private:
  owned_handle handle_;
};

}  // namespace palrt::gc

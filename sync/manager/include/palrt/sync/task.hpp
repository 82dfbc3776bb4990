// SPDX-License-Identifier: MIT
// The callables the sync manager's work queue holds (sync_manager.hpp). A host does not use
// these types by name: post() and invoke() make them from any callable.
//
// task: a move-only void() callable stored inside its owner (a queue node), so that posting
// work allocates nothing: callables up to task::inline_size bytes that move without throwing
// live in the node; a larger one is allocated once, when it is posted.
//
// function_ref: a non-owning reference to a callable that outlives it (invoke()'s, which
// lives on the waiting caller's stack).
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace palrt::sync {

class task {
 public:
  // Room for a lambda capturing six pointers, or a std::function; measured against the work
  // items palrt and its tests post, which capture a few pointers.
  static constexpr std::size_t inline_size = 48;

  task() noexcept = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, task>>>
  explicit task(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (stored_inline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      ops_ = &inline_ops<D>;
    } else {
      ::new (static_cast<void*>(storage_)) std::unique_ptr<D>(std::make_unique<D>(std::forward<F>(f)));
      ops_ = &heap_ops<D>;
    }
  }
  task(task&& other) noexcept { take(other); }
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  // Precondition: not empty. Exceptions from the callable propagate.
  void operator()() { ops_->run(storage_); }
  void reset() noexcept {
    if (ops_) ops_->destroy(storage_);
    ops_ = nullptr;
  }

  template <class D>
  static constexpr bool stored_inline =
      sizeof(D) <= inline_size && alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

 private:
  struct operations {
    void (*run)(void*);
    void (*relocate)(void* from, void* to) noexcept;  // move-construct into `to`, destroy `from`
    void (*destroy)(void*) noexcept;
  };
  template <class D>
  static constexpr operations inline_ops{[](void* p) { (*static_cast<D*>(p))(); },
                                         [](void* from, void* to) noexcept {
                                           ::new (to) D(std::move(*static_cast<D*>(from)));
                                           static_cast<D*>(from)->~D();
                                         },
                                         [](void* p) noexcept { static_cast<D*>(p)->~D(); }};
  template <class D>
  static constexpr operations heap_ops{[](void* p) { (**static_cast<std::unique_ptr<D>*>(p))(); },
                                       [](void* from, void* to) noexcept {
                                         ::new (to)
                                             std::unique_ptr<D>(std::move(*static_cast<std::unique_ptr<D>*>(from)));
                                         static_cast<std::unique_ptr<D>*>(from)->~unique_ptr();
                                       },
                                       [](void* p) noexcept { static_cast<std::unique_ptr<D>*>(p)->~unique_ptr(); }};

  void take(task& other) noexcept {
    ops_ = other.ops_;
    if (ops_) ops_->relocate(other.storage_, storage_);
    other.ops_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char storage_[inline_size];
  const operations* ops_ = nullptr;
};

// How invoke() hands the caller's own lambda (on the caller's stack, which waits) to the
// worker without copying it.
class function_ref {
 public:
  function_ref() noexcept = default;
  template <class F>
  explicit function_ref(F& f) noexcept
      : object_(static_cast<void*>(std::addressof(f))), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void* object_ = nullptr;
  void (*call_)(void*) = nullptr;
};

}  // namespace palrt::sync

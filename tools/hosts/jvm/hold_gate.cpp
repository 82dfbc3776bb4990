// SPDX-License-Identifier: MIT
#include "hold_gate.hpp"

namespace palrt_jvmhost {

void hold_gate::hold(const void* native) noexcept {
  std::lock_guard guard(lock_);
  held_ = false;
  released_ = false;
  armed_.store(native, std::memory_order_relaxed);  // see pass()
}

bool hold_gate::await_held(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock guard(lock_);
  return changed_.wait_for(guard, timeout, [this] { return held_; });
}

void hold_gate::release() noexcept {
  std::lock_guard guard(lock_);
  armed_.store(nullptr, std::memory_order_relaxed);
  released_ = true;
  changed_.notify_all();
}

void hold_gate::wait_for_release(const void* native) noexcept {
  std::unique_lock guard(lock_);
  if (armed_.load(std::memory_order_relaxed) != native) return;  // another call was held first
  armed_.store(nullptr, std::memory_order_relaxed);              // one call only
  held_ = true;
  changed_.notify_all();
  changed_.wait(guard, [this] { return released_; });
}

hold_gate& sweep_gate() noexcept {
  static hold_gate gate;
  return gate;
}

const void* sweep_gate_token() noexcept {
  static const char token = 0;
  return &token;
}

hold_gate& make_gate() noexcept {
  static hold_gate gate;
  return gate;
}

}  // namespace palrt_jvmhost

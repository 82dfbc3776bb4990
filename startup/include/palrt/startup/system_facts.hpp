// SPDX-License-Identifier: MIT
// Facts about this machine that decide whether membarrier registration is slow: the kernel
// takes the fast path with one thread or one online CPU, and rcu_expedited=1 turns the slow
// path's grace period from ~16 ms into ~tens of microseconds. Read only for reports.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <string>

namespace palrt::startup {

// /sys/kernel/rcu_expedited: 0 or 1, -1 when unreadable.
int rcu_expedited() noexcept;
// uname -r; "unknown" when uname fails. Throws only std::bad_alloc.
std::string kernel_release();

}  // namespace palrt::startup

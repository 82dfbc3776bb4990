// SPDX-License-Identifier: MIT
// palrt's language requirement, checked before anything else: every public C++ header
// includes this one first, so that a host compiling as C++17 gets one line that says what
// to change rather than pages of errors from concepts, <span> and std::atomic_ref inside
// palrt. (The C headers under palrt/core/ are C and need no such check.)
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "palrt needs C++20 (compile with -std=c++20 or later)"
#endif

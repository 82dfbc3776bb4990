// SPDX-License-Identifier: MIT
// palrt's language requirement, checked before anything else: every public C++ header
// includes this one first, so that a host compiling as C++17 gets one line that says what
// to change rather than pages of errors from concepts, <span> and std::atomic_ref inside
// palrt. (The C headers under palrt/core/ are C and need no such check.)
//
// #error does not stop GCC or Clang: they would go on into the header that included this
// one and bury the line under its errors. An #include that cannot be found is fatal to both,
// so one follows, named to say why the compiler stops there.
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "palrt needs C++20 (compile with -std=c++20 or later)"
#include "palrt: compilation stopped at the error above"
#endif

// SPDX-License-Identifier: MIT
// CLI11, included without a standard-stream initialiser in the translation unit.
//
// With libstdc++ 12 every translation unit that includes <iostream> holds a static
// std::ios_base::Init, constructed before main: the first one builds the classic locale and
// the eight standard streams, ~49,000 instructions, a sixth of a whole `palrt-startup` run
// (docs/BENCHMARKS.md, issue 27). CLI11 2.1 includes <iostream> in its headers, so a tool
// that parses options paid that on every run, also on the run without options that prints
// nothing. Included through this header, <iostream> contributes its declarations only; the
// program constructs a std::ios_base::Init itself where CLI11 may print (--help, --version:
// App::exit() writes to std::cout and std::cerr), which is where the cost belongs.
//
// Rules for a translation unit that includes this header:
// - include it before anything that includes <iostream> (otherwise <iostream> came first and
//   this header changes nothing: the translation unit holds its initialiser as before);
// - use std::cout, std::cerr, std::clog or std::cin only while a std::ios_base::Init
//   constructed by the program is alive (palrt-startup: from the start of option parsing).
// String streams, which CLI11 uses everywhere, need no initialiser.
//
// How: libstdc++'s <iostream> is guarded by _GLIBCXX_IOSTREAM; defining it after including
// what <iostream> includes, and declaring the streams as it does, leaves out the one line
// that matters (`static ios_base::Init __ioinit;`). tools/meson.build checks at configure
// time that this header still leaves it out (and that <iostream> alone still has it), so a
// libstdc++ that changes the header fails the build with a message.
#pragma once

#include <version>  // defines __GLIBCXX__ in libstdc++, and includes nothing of iostreams

#if defined(__GLIBCXX__) && !defined(_GLIBCXX_IOSTREAM)
#include <istream>
#include <ostream>
#define _GLIBCXX_IOSTREAM 1
namespace std {
extern istream cin;
extern ostream cout;
extern ostream cerr;
extern ostream clog;
}  // namespace std
#endif

#include <CLI/App.hpp>
#include <CLI/Config.hpp>
#include <CLI/Error.hpp>
#include <CLI/Formatter.hpp>
#include <CLI/Validators.hpp>

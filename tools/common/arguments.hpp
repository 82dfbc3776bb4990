// SPDX-License-Identifier: MIT
// How palrt's tools check arguments and show a bad one: a usage error is one short line on
// stderr (exit 2) whatever the user typed, be it 100 KB long or full of line breaks and
// terminal escapes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace palrt::tools {

// `value` as an error message shows it: quoted, control characters (C0, DEL, C1, U+2028/9)
// and bytes that are not UTF-8 escaped, and cut after about 40 bytes with the full length
// said, e.g. 'xxxxxxxx'... (100000 bytes). Enough to recognise the argument, never more.
std::string shown_value(std::string_view value);

// A message (CLI11's, or an exception's) made fit for one short line: every argument in argv
// that shown_value() would change is replaced by its shown form, any control character left
// is escaped, and the whole is cut at 240 bytes. argv may be empty.
std::string one_line(std::string_view message, int argc = 0, const char* const* argv = nullptr);

// A count given in plain decimal: digits only, no sign, blanks, leading zero, hex or octal
// prefix (strtol-style parsing reads 010 as 8 and 0x10 as 16), within [min, max].
std::optional<int> parse_count(std::string_view text, int min, int max);

}  // namespace palrt::tools

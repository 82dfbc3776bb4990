// SPDX-License-Identifier: MIT
// JSON string literals for palrt's tools' --report json / --json output, so that what they
// print parses whatever a kernel release, a path or a user-supplied name contains.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace palrt::tools {

// `s` as a JSON string literal, quotes included. Control characters (and DEL) are escaped;
// bytes that are not valid UTF-8 become U+FFFD, so the output is valid JSON whatever the input.
std::string json_string(std::string_view s);

// Length of the valid UTF-8 sequence starting at s[i] (1 for ASCII), or 0 if none starts
// there: overlong forms, surrogates, code points past U+10FFFF and truncated sequences are
// invalid.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

}  // namespace palrt::tools

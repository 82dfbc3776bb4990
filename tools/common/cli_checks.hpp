// SPDX-License-Identifier: MIT
// The tools' CLI11 checks, on an option's text before any conversion, with the messages of
// common/arguments.hpp: a count as parse_count() reads it, and one value of a fixed list.
//
// Inline, in the translation unit that builds the parser: a translation unit of its own that
// includes CLI11 would hold CLI11's namespace-scope validators (CLI::ExistingFile and seven
// more, constructed before main, ~4,400 instructions) in every run of every tool, also in a
// palrt-startup run without options that never builds a parser. Include CLI11 first (through
// common/cli11.hpp in palrt-startup).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/arguments.hpp"

namespace palrt::tools {

inline CLI::Validator count_in(int min, int max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        if (parse_count(text, min, max)) return {};
        return shown_value(text) + " is not a decimal number from " + range +
               " (digits only: no sign, blank, leading zero or 0x)";
      },
      range);
}

inline CLI::Validator one_of(std::vector<std::string> names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  std::string description;
  for (const auto& n : names) description += (description.empty() ? "" : "|") + n;
  return CLI::Validator(
      [names = std::move(names), list](std::string& text) -> std::string {
        if (std::find(names.begin(), names.end(), text) != names.end()) return {};
        return shown_value(text) + " is not one of " + list;
      },
      description);
}

}  // namespace palrt::tools

// SPDX-License-Identifier: MIT
#include "common/arguments.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include "common/json_string.hpp"

namespace palrt::tools {
namespace {

constexpr std::size_t max_shown_bytes = 40;  // of the value as shown, escapes included
constexpr std::size_t max_message_bytes = 240;

// Appends the character at s[i] to `out`, escaped if a terminal or a log reader could act on
// it (line breaks, escapes) or if it is not UTF-8; returns the bytes it took from s.
std::size_t append_printable(std::string& out, std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  char buf[16];
  if (c < 0x80) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
    return 1;
  }
  const std::size_t len = utf8_sequence_length(s, i);
  if (len == 0) {
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
    return 1;
  }
  // C1 controls (U+0080-U+009F: NEL among them) and the Unicode line and paragraph separators.
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  const bool c1 = c == 0xc2 && b1 <= 0x9f;
  const bool separator = c == 0xe2 && b1 == 0x80 && (s[i + 2] == '\xa8' || s[i + 2] == '\xa9');
  if (c1 || separator) {
    std::snprintf(buf, sizeof buf, "\\u%04x", c1 ? b1 : 0x2028 + (s[i + 2] == '\xa9'));
    out += buf;
  } else {
    out.append(s.substr(i, len));
  }
  return len;
}

std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) i += append_printable(out, s, i);
  return out;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

std::string shown_value(std::string_view value) {
  std::string out = "'";
  std::size_t i = 0;
  while (i < value.size() && out.size() < 1 + max_shown_bytes) i += append_printable(out, value, i);
  out += '\'';
  if (i < value.size()) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::string one_line(std::string_view message, int argc, const char* const* argv) {
  // The arguments that need it, longest first, so that "--order=<value>" is replaced whole
  // before "<value>" alone would be; each also without a "--name=" in front, which CLI11
  // strips before it quotes a value.
  std::vector<std::string_view> hostile;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (const std::string_view part :
         {arg, arg.substr(arg.find('=') == std::string_view::npos ? arg.size() : arg.find('=') + 1)}) {
      if (part.size() > max_shown_bytes || printable(part) != part) hostile.push_back(part);
    }
  }
  std::sort(hostile.begin(), hostile.end(), [](auto a, auto b) { return a.size() > b.size(); });
  std::string text(message);
  // Arguments first, so a long one is shown with its start and length; the cut below is only
  // for a message that is long on its own.
  for (const auto part : hostile) replace_all(text, part, shown_value(part));
  text = printable(text);
  if (text.size() > max_message_bytes) {
    std::size_t cut = max_message_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
    text = text.substr(0, cut) + "...";
  }
  return text;
}

std::optional<int> parse_count(std::string_view text, int min, int max) {
  if (text.empty() || text.size() > 9) return std::nullopt;  // 9 digits fit an int
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;  // 010: octal to some, ten to others
  int value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace palrt::tools

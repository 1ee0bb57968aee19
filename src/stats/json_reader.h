// A small JSON reader: enough for `pvdisk stat` and `pvdisk list` to read
// stats.json, and for the tests to check its shape. Whole unsigned integers
// are kept exactly (counters exceed a double's 53 bits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pvdisk::stats {

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

}  // namespace pvdisk::stats

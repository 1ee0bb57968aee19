#include "base/flag_values.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pvdisk {

absl::StatusOr<uint64_t> ParseWholeNumber(std::string_view flag,
                                          std::string_view text, uint64_t min,
                                          uint64_t max) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &value) ||
      value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", std::string(flag), " '", std::string(text),
        "' is not allowed: use a whole number from ", min, " to ", max));
  }
  return value;
}

bool FlagValues::Has(std::string_view flag) const {
  return values_.find(flag) != values_.end();
}

std::string FlagValues::Get(std::string_view flag,
                            std::string_view fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::string(fallback) : it->second;
}

absl::StatusOr<uint64_t> FlagValues::Number(std::string_view flag,
                                            uint64_t fallback, uint64_t min,
                                            uint64_t max) const {
  auto it = values_.find(flag);
  if (it == values_.end())
    return ParseWholeNumber(flag, absl::StrCat(fallback), min, max);
  return ParseWholeNumber(flag, it->second, min, max);
}

absl::StatusOr<bool> FlagValues::OneOf(std::string_view flag,
                                       std::string_view first,
                                       std::string_view second) const {
  const std::string value = Get(flag, first);
  if (value != first && value != second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", std::string(flag), " '", value, "' is not allowed: use ",
        std::string(first), " or ", std::string(second)));
  }
  return value == first;
}

}  // namespace pvdisk

// FlagValues: the flags a command line gave, by name (without "--"), each
// with its last value ("" for a switch). The libraries that own an options
// struct read their flags from it and check them (transport, fuse, cli), so
// that each flag's range and words are decided where the option is used,
// and a command only parses its words and hands the values on.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pvdisk {

// A whole number in [min, max]; the message names the flag, the text as
// given and the range: "--queues 'abc' is not allowed: use a whole number
// from 1 to 64".
absl::StatusOr<uint64_t> ParseWholeNumber(std::string_view flag,
                                          std::string_view text, uint64_t min,
                                          uint64_t max);

class FlagValues {
 public:
  FlagValues() = default;
  explicit FlagValues(std::map<std::string, std::string, std::less<>> values)
      : values_(std::move(values)) {}

  bool Has(std::string_view flag) const;
  // The flag's value, or `fallback` when it was not given.
  std::string Get(std::string_view flag, std::string_view fallback) const;
  // The flag's value as a whole number in [min, max], or `fallback` when
  // it was not given (ParseWholeNumber's message otherwise).
  absl::StatusOr<uint64_t> Number(std::string_view flag, uint64_t fallback,
                                  uint64_t min, uint64_t max) const;
  // A two-way switch: the value (or `first` when not given) must be one of
  // the two words; true when it is `first`. Refused: "--merge 'maybe' is
  // not allowed: use on or off".
  absl::StatusOr<bool> OneOf(std::string_view flag, std::string_view first,
                             std::string_view second) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace pvdisk

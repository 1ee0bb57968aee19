#include "base/size.h"

#include <cctype>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pvdisk {
namespace {

absl::Status BadSize(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      "size '", absl::string_view(text.data(), text.size()),
      "' does not parse: use a positive whole number of bytes with an optional "
      "unit K, M, G or T (powers of 1024), e.g. 512, 64K, 256M, 1G"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return BadSize(text);
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return BadSize(text);

  std::string_view unit = text.substr(i);
  int shift = 0;
  if (!unit.empty()) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      case 'B':
        shift = 0;
        break;
      default:
        return BadSize(text);
    }
    std::string_view rest = unit.substr(1);
    bool bytes_only = std::toupper(static_cast<unsigned char>(unit[0])) == 'B';
    if (bytes_only) {
      if (!rest.empty()) return BadSize(text);
    } else if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" ||
                 rest == "ib")) {
      return BadSize(text);
    }
  }
  if (value == 0) return BadSize(text);
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return BadSize(text);
  }
  return value << shift;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrCat(bytes, " ", kUnits[unit]);
}

}  // namespace pvdisk

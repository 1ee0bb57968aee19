// Parsing and printing of byte sizes as users type them ("256M", "1G", "4096").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pvdisk {

// Parses a byte count: digits, optionally followed by one binary unit
// K, M, G or T (case-insensitive, optional "iB" or "B" after it), e.g. "512",
// "4k", "256M", "1GiB". Returns InvalidArgument naming the text and the allowed
// forms for anything else, for zero, and for values that overflow 64 bits.
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// "1 GiB", "256 MiB", "4 KiB" or "1000 B": the largest unit that divides
// `bytes` exactly.
std::string FormatSize(uint64_t bytes);

}  // namespace pvdisk

// Minimal logging: Debian 12's Abseil has no absl::log. Messages go to stderr
// with a "pvdisk: " prefix. Use on the control path only, never per request.
#pragma once

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"

namespace pvdisk {

template <typename... Args>
void LogInfo(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string line = absl::StrFormat(format, args...);
  std::fprintf(stderr, "pvdisk: %s\n", line.c_str());
}

}  // namespace pvdisk

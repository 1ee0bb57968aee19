// The one place where an errno becomes an absl::Status (control path only).
#pragma once

#include <cerrno>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pvdisk {

// Returns a Status for `error_number` whose message is "<context>: <strerror>".
inline absl::Status ErrnoError(int error_number, std::string_view context) {
  return absl::ErrnoToStatus(error_number,
                             absl::string_view(context.data(), context.size()));
}

}  // namespace pvdisk

// The checks of pvdisk mount's MOUNTPOINT before anything is mounted: it
// exists, is a directory, resolves to an absolute path and has nothing
// mounted on it (a dead FUSE mount is named as such, with how to clear it).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pvdisk::cli {

// The mountpoint's absolute path, or one line naming it and what is wrong.
absl::StatusOr<std::string> CheckMountpoint(const std::string& mountpoint);

}  // namespace pvdisk::cli

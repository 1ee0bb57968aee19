// What /etc/fuse.conf allows an unprivileged user.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace pvdisk::cli {

inline constexpr const char* kFuseConfPath = "/etc/fuse.conf";

// Whether the fuse.conf at `path` has the line `user_allow_other`, which
// fusermount3 needs before it mounts with allow_other for a user who is not
// root. A missing or unreadable file allows nothing.
bool FuseConfAllowsOther(const std::string& path);

// --allow-other: refused for a user who is not root (`root`) unless the
// fuse.conf at `path` allows it, with a message saying what to do.
absl::Status CheckAllowOther(bool allow_other, bool root,
                             const std::string& path = kFuseConfPath);

}  // namespace pvdisk::cli

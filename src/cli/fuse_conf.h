// What /etc/fuse.conf allows an unprivileged user.
#pragma once

#include <string>

namespace pvdisk::cli {

inline constexpr const char* kFuseConfPath = "/etc/fuse.conf";

// Whether the fuse.conf at `path` has the line `user_allow_other`, which
// fusermount3 needs before it mounts with allow_other for a user who is not
// root. A missing or unreadable file allows nothing.
bool FuseConfAllowsOther(const std::string& path);

}  // namespace pvdisk::cli

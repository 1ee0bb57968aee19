// Reading /proc/self/mountinfo: is a path a mount point, and of what. Reading
// the table never touches the mounted filesystem itself.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pvdisk::cli {

struct MountEntry {
  std::string mount_point;
  std::string fs_type;  // e.g. "fuse.pvdisk"
  std::string source;   // e.g. "pvdisk-1234"
};

// Every entry of /proc/self/mountinfo, in its order.
std::vector<MountEntry> AllMounts();

// The entry mounted at exactly `absolute_path` (the last one if stacked).
std::optional<MountEntry> FindMount(const std::string& absolute_path);

// The daemon pid of a pvdisk mount (from its source "pvdisk-PID"), or
// nullopt if the entry is not a pvdisk mount.
std::optional<pid_t> PvdiskDaemonPid(const MountEntry& entry);

// `path` made absolute without resolving its last component: the parent
// directory is resolved with realpath, so a mountpoint whose daemon died
// (ENOTCONN) is still named correctly and a live one is not touched.
std::optional<std::string> AbsoluteMountPath(const std::string& path);

}  // namespace pvdisk::cli

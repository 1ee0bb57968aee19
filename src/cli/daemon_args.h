// What a running pvdisk daemon was started with, read back from its command
// line (/proc/PID/cmdline): the daemon is the forked `pvdisk mount`, so its
// argv is the user's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pvdisk::cli {

// The daemon's argv after "pvdisk mount", or nullopt (not readable, or not
// a `pvdisk mount`).
std::optional<std::vector<std::string>> MountArguments(pid_t pid);

// The daemon's --shutdown-timeout in seconds (its default when not given),
// or nullopt when its command line cannot be read or parsed.
std::optional<uint32_t> DaemonShutdownTimeout(pid_t pid);

}  // namespace pvdisk::cli

// systemd's readiness protocol (sd_notify(3)) without libsystemd: when the
// service manager set NOTIFY_SOCKET, a state such as "READY=1" is one
// datagram to that AF_UNIX socket (a path, or an abstract name written with
// a leading '@'). Without NOTIFY_SOCKET it does nothing.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace pvdisk::cli {

// Sends `state` (e.g. "READY=1\nSTATUS=serving 2 disks") to NOTIFY_SOCKET.
// The first call reads the variable and removes it from the environment, so
// that the backend processes pvdisk starts do not speak for it.
absl::Status NotifyServiceManager(std::string_view state);

}  // namespace pvdisk::cli

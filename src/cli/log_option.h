// `pvdisk mount --log FILE|syslog`: where the daemon writes its warnings and
// errors (base/log_sink.h, base/event_log.h). Without --log a daemon writes
// to a file of its own in the runtime directory (DefaultLogPath) and a
// --foreground mount to its stderr.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pvdisk::cli {

struct LogChoice {
  enum class Kind { kStderr, kFile, kSyslog };
  Kind kind = Kind::kStderr;
  std::string path;  // kFile: absolute
};

// The value of --log ("" when absent) for a mount at `mountpoint`
// (absolute): "syslog", or a file path (made absolute against the current
// directory); absent: the default file, or stderr in the foreground. Checks
// the text only; OpenLog checks the file.
absl::StatusOr<LogChoice> CheckLogFlag(const std::string& value, bool given,
                                       bool foreground,
                                       const std::string& mountpoint);

// The runtime directory pvdisk keeps its logs in: $XDG_RUNTIME_DIR/pvdisk,
// else /run/user/UID/pvdisk if /run/user/UID exists, else /tmp/pvdisk-UID;
// made (mode 0700) if missing. It must be a directory of the current user,
// not a symbolic link.
absl::StatusOr<std::string> LogDirectory();

// The default log file of a mount at `mountpoint`: LogDirectory()/ the
// mountpoint with its slashes as dashes, ".log" (e.g. /mnt/a ->
// mnt-a.log), so that a mount at the same place appends to the same file.
absl::StatusOr<std::string> DefaultLogPath(const std::string& mountpoint);

// Opens (creates, mode 0600) `path` for appending; the message names the
// path and why it cannot be written.
absl::StatusOr<int> OpenLog(const std::string& path);

// How the mount message names the log: the path, "syslog" or "stderr".
std::string LogName(const LogChoice& log);

}  // namespace pvdisk::cli

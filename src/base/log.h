// Minimal logging: Debian 12's Abseil has no absl::log. Each message is one
// line to the process's log target (log_sink.h): stderr with a "pvdisk: "
// prefix unless the daemon was given a log file or syslog. Use on the
// control path only, never per request; events that can repeat per request
// (I/O errors, invalid requests) go through LogEvent (event_log.h), which
// limits their rate.
#pragma once

#include <string>

#include "absl/strings/str_format.h"
#include "base/log_sink.h"

namespace pvdisk {

template <typename... Args>
void LogInfo(const absl::FormatSpec<Args...>& format, const Args&... args) {
  WriteLogLine(absl::StrFormat(format, args...));
}

}  // namespace pvdisk

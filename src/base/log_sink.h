// Where the process's log lines go: stderr (the default, and a
// --foreground mount's without --log), a log file, or syslog. Set once at
// start-up, before any thread logs; writing a line is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pvdisk {

enum class LogTarget : uint8_t {
  kStderr = 0,  // "pvdisk: LINE" on stderr, as a command-line tool writes
  kFile = 1,    // "TIME pvdisk[PID]: LINE", one write(2) on an O_APPEND fd
  kSyslog = 2,  // syslog(3), ident "pvdisk", facility daemon, with the pid
};

// Sends every later line to `target`; for kFile, to `fd` (kept open; an
// O_APPEND descriptor, so that the lines of several processes sharing the
// file never interleave within a line).
void SetLogTarget(LogTarget target, int fd = 2);
LogTarget CurrentLogTarget();
// The target for a child process that inherits this one's stderr: kFile
// only if the log file is this process's stderr (fd 2).
LogTarget InheritedLogTarget();

// Writes one line (no newline in `line`) to the target.
void WriteLogLine(std::string_view line);

// The current UTC time in ISO 8601 with microseconds, e.g.
// "2026-12-05T09:42:49.123456Z": the start of a log file's line.
std::string LogTimeNow();

}  // namespace pvdisk

// The daemon's warnings and errors that concern one disk and queue: each is
// one line "disk=NAME queue=Q KIND: CAUSE" to the log target (log_sink.h),
// rate-limited per kind, disk and queue (event_limiter.h: at most
// kEventBurst lines per kEventWindowSeconds, then one line
// "KIND: N more suppressed in the last ..."), so that a storm (every request
// failing) never floods the log. Called on error paths only, never on a
// request's normal path; it takes a lock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pvdisk {

enum class Event {
  kEngineRestart,   // an I/O engine failed as a whole and was replaced
  kBackendRestart,  // a backend process died and a new one replaced it
  kRingBroken,      // a ring the backend stopped serving
  kInvalidRequest,  // a ring request that failed validation
  kRefusedWrite,    // a write to a read-only disk
  kIoError,         // a ring request answered with an error
};

// The KIND word of a line, e.g. "engine_restart".
std::string_view EventName(Event event);

inline constexpr uint32_t kEventBurst = 5;
inline constexpr uint32_t kEventWindowSeconds = 10;

// `disk`: the disk's file name in the mount ("" if unknown); `queue`: the
// queue or queues ("0", "0,1"; "" if none).
void LogEvent(Event event, std::string_view disk, std::string_view queue,
              std::string_view cause);

// Writes the counts of events suppressed and not reported yet: call before
// the process ends.
void FlushEventLog();

}  // namespace pvdisk

// ControlClient: `pvdisk trace`'s side of the mount's trace control file
// (trace_control.h): opens MOUNTPOINT/.trace, names the disk, and reads the
// events the daemon has recorded since.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/event.h"

namespace pvdisk::trace {

class ControlClient {
 public:
  // Starts tracing `disk` of the mount. NotFound: no such disk;
  // FailedPrecondition: another tracer has it; Unavailable: the daemon
  // does not answer or has no trace file.
  static absl::StatusOr<ControlClient> Start(const std::string& mountpoint,
                                             const std::string& disk,
                                             TraceScope scope);
  ControlClient(ControlClient&& other) noexcept;
  ControlClient& operator=(ControlClient&&) = delete;
  ~ControlClient();  // stops the trace

  // Appends events waiting in the daemon to `out` (one read: there may be
  // more); returns how many, 0 when none is waiting.
  absl::StatusOr<size_t> Read(std::vector<TraceEvent>* out);

 private:
  explicit ControlClient(int fd);
  int fd_ = -1;
  std::vector<char> buffer_;
};

}  // namespace pvdisk::trace

// TraceControl: the daemon's side of `pvdisk trace`, behind the mount's
// hidden control file (kTraceName, not listed by readdir). A tracer opens
// the file, writes "block NAME" or "all NAME" to it (the TraceScope, then
// a disk's name), which turns on that disk's queue traces (queue_trace.h),
// and then reads: each READ drains the buffers into
// whole TraceEvents (event.h), none when nothing is waiting (0 bytes: the
// reader polls), and first a kLost event for each queue that dropped
// events. Closing the file turns the traces off.
//
// One tracer per disk at a time: a second gets EBUSY. Threads: any FUSE
// thread may call any method; one lock serialises them (the control path,
// never the request path).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "trace/queue_trace.h"

namespace pvdisk::trace {

inline constexpr const char* kTraceName = ".trace";

class TraceControl {
 public:
  // The queue traces of the disk named so, or an empty list: no such disk.
  using DiskFinder =
      std::function<std::vector<QueueTrace*>(std::string_view disk)>;

  explicit TraceControl(DiskFinder find_disk)
      : find_disk_(std::move(find_disk)) {}
  ~TraceControl();

  // A new handle for OPEN's reply.
  uint64_t Open();
  // Starts tracing for `handle` what `command` ("block NAME" or "all
  // NAME") names: 0, or -ENOENT (no such disk), -EBUSY (someone traces
  // it), -EINVAL (another command, this handle traces already, or no such
  // handle).
  int Select(uint64_t handle, std::string_view command);
  // Up to `max` bytes of whole events into `out` (cleared first); -EINVAL
  // for a handle that traces nothing.
  int Read(uint64_t handle, size_t max, std::string* out);
  // Stops the handle's trace and forgets the handle.
  void Release(uint64_t handle);
  // A disk is going away with these queue traces: a session tracing them
  // stops and reads nothing more (its reads then fail with -EINVAL, as a
  // handle that traces nothing).
  void Forget(const std::vector<QueueTrace*>& queues);

 private:
  struct Session {
    std::string disk;  // empty until Select
    std::vector<QueueTrace*> queues;
    size_t next_queue = 0;  // where the next Read starts draining
  };

  DiskFinder find_disk_;
  std::mutex mu_;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, Session> sessions_;
};

}  // namespace pvdisk::trace

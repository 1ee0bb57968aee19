// BlktraceWriter: TraceEvents (event.h) as blktrace's per-CPU files
// (blktrace_format.h), DIR/NAME.blktrace.Q with the queue number as the
// CPU, so that `blkparse -i NAME` and btt read them unchanged.
//
// Q, M, F, G, I, D and C become records (D and C once per ring request:
// their lead event); pvdisk's own steps are left out. Each thread that
// appears in a file is named there first by a process note, and Finish()
// ends each file with a message note of the events the daemon dropped:
// "pvdisk: lost N events".
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/blktrace_format.h"
#include "trace/event.h"

namespace pvdisk::trace {

class BlktraceWriter {
 public:
  // The name of thread `tid` (its comm), for the process notes.
  using ThreadName = std::function<std::string(uint32_t tid)>;

  // Creates the `queues` files; fails (naming the file) if one cannot be,
  // removing those made. `device` is the (major, minor) recorded.
  static absl::StatusOr<std::unique_ptr<BlktraceWriter>> Create(
      const std::string& dir, const std::string& name, uint32_t queues,
      uint32_t device, ThreadName thread_name);
  ~BlktraceWriter();

  void Add(const TraceEvent& event);
  // Writes the lost-event notes (`lost[q]` per queue) and closes the files.
  absl::Status Finish(const std::vector<uint64_t>& lost);

  // Every file written, for the command's summary.
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  struct File {
    std::FILE* stream = nullptr;
    uint32_t sequence = 0;
    std::set<uint32_t> named;  // threads named by a process note
    uint64_t last_ns = 0;
  };

  BlktraceWriter() = default;
  void Write(File& file, uint32_t cpu, blk::Record record,
             const void* pdu = nullptr, uint16_t pdu_len = 0);

  uint32_t device_ = 0;
  ThreadName thread_name_;
  std::vector<File> files_;
  std::vector<std::string> paths_;
  bool write_failed_ = false;
};

// The blktrace action word of `event` (code and the R/W/D/F/S categories
// as the kernel sets them), or 0 for a step blktrace has no action for.
uint32_t BlktraceAction(const TraceEvent& event);

}  // namespace pvdisk::trace

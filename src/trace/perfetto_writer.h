// PerfettoWriter: TraceEvents (event.h) as Chrome trace-event JSON, which
// ui.perfetto.dev (and chrome://tracing) opens: {"traceEvents": [...]}.
//
// Tracks: a process per queue ("queue N"), and in it a thread track per
// thread that recorded something (named after the thread). Each request
// piece is an async slice on its queue (ph "b"/"e", one id per piece, so
// that the many pieces in flight at once lie side by side): the whole
// piece from FUSE handing it over to the reply, and inside it its stages,
// each from the step that starts it to the one that ends it:
//   FUSE wait     arrival at the daemon -> Q (queue takes it)
//   staging       Q -> D (written to the ring; merged pieces wait together)
//   ring          D -> the backend takes it
//   backend take  take -> handed to the engine
//   engine        engine -> response written
//   completion    response -> C (the frontend consumes it)
//   reply         C -> FUSE reply
// (ring runs D -> C when the backend recorded nothing: a backend process.)
// Kicks and interrupts are instant events on the thread that sent them.
// Times are microseconds from the first event.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/event.h"

namespace pvdisk::trace {

class PerfettoWriter {
 public:
  using ThreadName = std::function<std::string(uint32_t tid)>;

  // Creates `path` (which must not exist); the error names it.
  static absl::StatusOr<std::unique_ptr<PerfettoWriter>> Create(
      const std::string& path, ThreadName thread_name);
  ~PerfettoWriter();

  // Events of one queue must come in the order its trace recorded them.
  void Add(const TraceEvent& event);
  // Writes what is still open, the lost count (as "otherData") and closes.
  absl::Status Finish(uint64_t lost);

 private:
  // One piece of a request, from Q on.
  struct Piece {
    uint64_t sector = 0;
    uint32_t bytes = 0;
    uint8_t op = 0;
    uint32_t ring_id = kNoRingId;
    uint32_t fuse_tid = 0;
    uint64_t queued = 0, issued = 0, taken = 0, engine = 0, answered = 0,
             completed = 0;
    uint32_t backend_tid = 0, complete_tid = 0;
  };
  // A block request (all its pieces) of one queue, until its reply.
  struct Request {
    std::vector<Piece> pieces;
    size_t open = 0;  // pieces not completed yet
  };
  // A ring request's backend steps, until its C.
  struct RingSteps {
    uint64_t taken = 0, engine = 0, answered = 0;
    uint32_t tid = 0;
  };
  using IoKey = std::pair<uint16_t, uint64_t>;    // queue, io
  using RingKey = std::pair<uint16_t, uint32_t>;  // queue, ring id

  PerfettoWriter() = default;
  void Emit(const Request& request, uint16_t queue, uint64_t arrival,
            uint64_t replied, uint32_t reply_tid);
  void Slice(uint64_t id, uint16_t queue, uint32_t tid, const char* name,
             uint64_t from, uint64_t to);
  void Instant(uint16_t queue, uint32_t tid, const char* name, uint64_t at);
  void Track(uint16_t queue, uint32_t tid);
  void Line(const std::string& json);
  std::string Us(uint64_t ns) const;

  std::FILE* stream_ = nullptr;
  ThreadName thread_name_;
  bool first_line_ = true;
  uint64_t base_ns_ = 0;  // CLOCK_MONOTONIC at Create()
  uint64_t next_id_ = 1;
  std::map<IoKey, Request> requests_;
  std::map<RingKey, RingSteps> rings_;
  std::set<uint16_t> named_queues_;
  std::set<std::pair<uint16_t, uint32_t>> named_threads_;
};

}  // namespace pvdisk::trace

// TraceEvent: one step in the life of a request, as the daemon records it
// (queue_trace.h) and hands it to `pvdisk trace` through the mount's trace
// control file (trace_control.h). The record is the wire format between the
// two: fixed size, native byte order, read by a process on the same machine.
#pragma once

#include <cstdint>

namespace pvdisk::trace {

// What happened. Q, M, F, G, I, D and C are blktrace's actions (and become
// blk_io_trace records, blktrace_writer.h); the others are pvdisk's own
// steps, drawn only on the Perfetto timeline (perfetto_writer.h).
enum class TraceAction : uint8_t {
  kQueue = 1,     // Q: the queue received a piece of a FUSE request
  kBackMerge,     // M: it joined the end of a staged ring request
  kFrontMerge,    // F: it joined the front of a staged ring request
  kGetRequest,    // G: it became a ring request of its own...
  kInsert,        // I: ...in the staging queue
  kIssue,         // D: its ring request was written to the ring
  kComplete,      // C: its ring request's response was consumed
  kKick,          // the frontend notified the backend (instant)
  kTake,          // the backend took the ring request off the ring
  kEngineQueued,  // the backend handed it to the I/O engine
  kEngineDone,    // the engine answered; the response is written
  kInterrupt,     // the backend notified the frontend (instant)
  kReply,         // FUSE got its reply; `aux` is when FUSE handed it over
  kLost,          // `aux` events of this queue were dropped (buffer full)
};

// Which steps a trace records: blktrace's actions only (Q to C), or every
// step (the timeline needs them all).
enum class TraceScope : uint8_t { kBlock, kAll };

inline bool IsBlockAction(TraceAction action) {
  return action >= TraceAction::kQueue && action <= TraceAction::kComplete;
}

// TraceEvent::flags: the operation in the low bits, then markers.
inline constexpr uint8_t kOpMask = 0x07;  // transport::BlockOp's value
// On kIssue and kComplete, which come once per piece the ring request
// carries: set on the first, the one that stands for the ring request.
inline constexpr uint8_t kLeadFlag = 0x80;
inline constexpr uint8_t kFailedFlag = 0x40;  // kComplete: an error result

inline constexpr uint32_t kNoRingId = 0xffffffffu;

struct TraceEvent {
  uint64_t time_ns = 0;  // stats::MonotonicNanos()
  uint64_t sector = 0;   // 512-byte sectors
  // The piece's identity while it lives (the FUSE request's block request;
  // reused after it is answered), 0 for events of a ring request alone.
  uint64_t io = 0;
  uint64_t aux = 0;  // see TraceAction
  uint32_t bytes = 0;
  uint32_t ring_id = kNoRingId;
  uint32_t tid = 0;  // the thread that recorded it
  uint16_t queue = 0;
  TraceAction action = TraceAction::kQueue;
  uint8_t flags = 0;
};
static_assert(sizeof(TraceEvent) == 48, "the wire format is 48 bytes");

}  // namespace pvdisk::trace

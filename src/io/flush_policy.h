// Where the uring engine runs a flush.
//
// io_uring never runs an fsync inline: IORING_OP_FSYNC goes to an io-wq
// worker, which the submitting thread wakes, and whose completion wakes the
// submitting thread again. On a borrowed ring (the inline placement: the
// FUSE queue thread that serves the request) with nothing else to do, the
// thread calls fdatasync(2) itself instead and sleeps in it: the device's
// completion then wakes the thread that answers, with no worker between
// (docs/perf/fsync-2026-12-06.md).
//
// While the thread sleeps in fdatasync nothing else on its ring moves: not
// this engine's other I/O, not the I/O of the other engines that borrow the
// same ring (the mount's other disks), not the FUSE requests the thread has
// taken and not answered, and not completions already posted or pending on
// the ring (new FUSE requests, finished I/O). So the flush runs on the
// thread only when all of those are nil; otherwise it stays asynchronous,
// as it always does on a ring of the engine's own (a backend thread that
// waits in Run()).
#pragma once

#include <cstdint>

namespace pvdisk::io {

// What the ring carries when a flush is queued.
struct FlushContext {
  // The engine is on a borrowed ring.
  bool borrowed = false;
  // The engine's own requests in flight.
  uint32_t engine_inflight = 0;
  // Requests in flight on the ring of every engine that borrows it (this
  // one's included): RingLender::BorrowedInFlight().
  uint32_t ring_inflight = 0;
  // Requests the ring's owner has taken and not yet answered, the one this
  // flush serves included: RingLender::RequestsOpen() (FUSE requests on
  // their queue thread; 0 for an owner that does not count them).
  uint32_t requests_open = 0;
  // Completions posted on the ring or pending to be posted, not yet reaped:
  // RingLender::HasWaitingCompletions().
  bool completions_waiting = false;
};

// Whether the flush runs as fdatasync(2) on the calling thread: on a
// borrowed ring with nothing of this engine's or of any other borrower's in
// flight, no request open but (at most) the flush's own, and no completion
// waiting on the ring.
constexpr bool FlushOnCallingThread(const FlushContext& at) {
  return at.borrowed && at.engine_inflight == 0 && at.ring_inflight == 0 &&
         at.requests_open <= 1 && !at.completions_waiting;
}

}  // namespace pvdisk::io

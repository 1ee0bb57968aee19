// Where the uring engine runs a flush.
//
// io_uring never runs an fsync inline: IORING_OP_FSYNC goes to an io-wq
// worker, which the submitting thread wakes, and whose completion wakes the
// submitting thread again. On a borrowed ring (the inline placement: the
// FUSE queue thread that serves the request) with nothing else in flight on
// the engine, nothing else of the engine's could move meanwhile, so the
// thread calls fdatasync(2) itself instead and sleeps in it: the device's
// completion then wakes the thread that answers, with no worker between
// (docs/perf/fsync-2026-12-06.md). With other I/O in flight, or on a ring
// of the engine's own (a backend thread that waits in Run()), the flush
// stays asynchronous, so that it never holds back this engine's
// completions. Other engines on the same borrowed ring (other disks of the
// mount) are not asked: their I/O and new FUSE requests on that queue wait
// for the fdatasync (at most the device's flush time).
#pragma once

#include <cstdint>

namespace pvdisk::io {

// Whether a flush runs as fdatasync(2) on the calling thread.
// `borrowed`: the engine is on a borrowed ring; `inflight`: the engine's
// other requests in flight when the flush is queued.
constexpr bool FlushOnCallingThread(bool borrowed, uint32_t inflight) {
  return borrowed && inflight == 0;
}

}  // namespace pvdisk::io

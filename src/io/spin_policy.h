// Which of the uring engine's I/O a thread may spin for on its own CPU.
//
// A thread that drives the engine (the inline placement's FUSE queue
// thread) spins for a lone completion (--poll-us) rather than sleep: on
// this kind of machine a sleeping vCPU pays a costly wake-up. That pays
// only when the completion can arrive while the thread spins. Some cannot:
// io_uring never runs an fsync or a fallocate inline but hands it to an
// io-wq worker, and the device's cache flush that an fdatasync issues is
// dispatched by the block layer's kblockd worker on the submitting CPU.
// The spin yields each turn, but sched_yield gives the CPU only to threads
// of the spinner's own scheduling group (with autogroups, the daemon's
// own), so kblockd, in the root group, may wait out the whole spin: in
// write+fsync at iodepth 1 traced beside a build, the flush reached the
// device 37 us (median) after it was queued with the 50 us default spin,
// and 9-14 us without it (docs/perf/fsync-2026-12-06.md). A flush takes
// longer than the spin on any disk with a volatile cache anyway. (A lone
// flush on a borrowed ring is not queued at all: io/flush_policy.h.)
#pragma once

#include "io/io_engine.h"

namespace pvdisk::io {

// Whether the uring engine's `op` completes only after a kernel thread has
// run for it on the submitting CPU (so that a thread spinning there for its
// completion delays it): flushes, discards and write-zeroes.
constexpr bool CompletionNeedsKernelThread(IoOp op) {
  switch (op) {
    case IoOp::kRead:
    case IoOp::kWrite:
      return false;
    case IoOp::kFlush:
    case IoOp::kDiscard:
    case IoOp::kWriteZeroes:
      return true;
  }
  return true;
}

}  // namespace pvdisk::io

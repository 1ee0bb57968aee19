// FloorDisk: bench/fuse_floor's image mode (`floor-disk` in bench/compare).
//
// pvdisk with its transport taken out: each FUSE queue thread hands the
// requests it receives straight to an I/O engine of pvdisk's (io_engine.h)
// that borrows the thread's FUSE ring, as the inline placement's backends
// do: the uring engine reads an image file with O_DIRECT, the rbd engine an
// RBD image. READs land in the ring entry's payload and WRITEs go out from
// it, and the reply is committed with the thread's next io_uring_enter. No
// rings of pvdisk's, no validation, no merging, no counters. It is the
// ceiling that FUSE over io_uring leaves to pvdisk on that image, measured
// beside native fio (or librbd alone) on the same image.
//
// Requests are served on the queue thread that received them (reads,
// writes and fsyncs; the rest answer at once). One that reaches the handler
// off a queue thread (none should: they all come on the ring) answers EIO.
//
// With the null engine and `delay=US` it is the delay model's floor: the
// same DelayEngine (io/delay_engine.h) on the FUSE queue thread's ring, as
// pvdisk's inline placement runs it, with nothing of pvdisk's transport
// around it (bench/delay's `floor` configs).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuse/channel/ring_companion.h"
#include "fuse/protocol/handler.h"
#include "image/image.h"
#include "io/io_engine.h"
#include "io/ring_lender.h"

namespace pvdisk::bench {

class FloorDiskQueue;  // one queue thread's engine and requests

// Makes one queue thread's engine, borrowing `lender` (its FUSE ring), for
// `depth` requests in flight at most. Called on that thread.
using FloorEngineMaker =
    std::function<absl::StatusOr<std::unique_ptr<io::IoEngine>>(
        io::RingLender* lender, uint32_t depth)>;

// How the floor serves an image file, from fuse_floor's words after IMAGE.
struct FloorOptions {
  // The engine of an image file: kUring (O_DIRECT reads and writes) or
  // kNull (no I/O: reads return zeros), "engine=uring|null".
  io::EngineKind engine = io::EngineKind::kUring;
  // "max-inflight=N": at most N requests with the engines of all queue
  // threads together, held completions of a delay included (as pvdisk's
  // --engine-max-inflight counts them on one backend); the others wait on
  // their queue thread, in arrival order. 0: no cap.
  uint32_t max_inflight = 0;
  // "spin=held": while the engine holds any request the queue thread spins
  // for its ring's next completion instead of sleeping (a timer whose
  // wake-up costs nothing: what a delay gives when releases are exact).
  bool spin_while_held = false;
};

// Parses fuse_floor's option words (engine=..., max-inflight=N, spin=held).
// Errors are one line naming the word and what is allowed.
absl::StatusOr<FloorOptions> ParseFloorOptions(
    const std::vector<std::string_view>& words);

class FloorDisk {
 public:
  // Opens `image`, a --disk argument of pvdisk's (an image file, served by
  // `options.engine`, or rbd:POOL/IMAGE[,conf=PATH,...], by the rbd engine;
  // delay=US[,delay-write=US] is allowed, other options are refused), for
  // `size` bytes of it. `depth`: the most requests one queue thread may
  // hold at once (its FUSE queue's depth, times the queues whose entries
  // it may hold). Errors are one line naming what is wrong.
  static absl::StatusOr<std::unique_ptr<FloorDisk>> Open(
      std::string_view image, uint64_t size, uint32_t depth,
      const FloorOptions& options = {});
  ~FloorDisk();

  // Whether it serves with a completion delay (delay=).
  bool delayed() const { return delayed_; }

  // For ServeOptions::companion.
  std::unique_ptr<fuse::channel::RingCompanion> MakeCompanion(uint32_t qid);

  // Queue the request's I/O on the calling queue thread's engine; the reply
  // goes when it completes.
  void Read(const fuse::protocol::Request& request,
            fuse::protocol::Reply reply);
  void Write(const fuse::protocol::Request& request,
             fuse::protocol::Reply reply);
  void Fsync(fuse::protocol::Reply reply);

 private:
  FloorDisk(uint64_t size, uint32_t depth, const FloorOptions& options)
      : size_(size), depth_(depth), options_(options) {}

  // The image the engines serve; it outlives them.
  std::shared_ptr<image::Image> image_;
  FloorEngineMaker make_engine_;
  const uint64_t size_;
  const uint32_t depth_;
  const FloorOptions options_;
  bool delayed_ = false;
  // Requests with the engines of all queue threads (max-inflight's count).
  std::atomic<uint32_t> inflight_{0};
};

}  // namespace pvdisk::bench

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
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

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

class FloorDisk {
 public:
  // Opens `image`, a --disk argument of pvdisk's (an image file, served by
  // the uring engine with O_DIRECT, or rbd:POOL/IMAGE[,conf=PATH,...], by
  // the rbd engine; other options are refused), for `size` bytes of it.
  // `depth`: the most requests one queue thread may hold at once (its FUSE
  // queue's depth, times the queues whose entries it may hold). Errors are
  // one line naming what is wrong.
  static absl::StatusOr<std::unique_ptr<FloorDisk>> Open(std::string_view image,
                                                         uint64_t size,
                                                         uint32_t depth);
  ~FloorDisk();

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
  FloorDisk(uint64_t size, uint32_t depth) : size_(size), depth_(depth) {}

  // The image the engines serve; it outlives them.
  std::shared_ptr<image::Image> image_;
  FloorEngineMaker make_engine_;
  const uint64_t size_;
  const uint32_t depth_;
};

}  // namespace pvdisk::bench

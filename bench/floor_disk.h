// FloorDisk: bench/fuse_floor's image mode (`floor-disk` in bench/compare).
//
// The least a FUSE disk server can do on the uring channel and still serve a
// real image: each FUSE queue thread reads and writes the image file itself
// (O_DIRECT) through its own FUSE ring (a channel::RingCompanion borrowing
// it), reads land straight in the ring entry's payload and writes go out
// from it, and the reply is committed with the thread's next io_uring_enter.
// No transport, no rings of pvdisk's, no stats, no checks beyond the kernel's.
// It is what pvdisk's default (inline) placement would cost with its whole
// transport taken out: the ceiling that FUSE over io_uring leaves to any
// FUSE disk on this machine, measured beside native fio on the same image.
//
// Requests are served on the queue thread that received them (reads and
// writes only; the rest answer at once). A READ or WRITE that reaches the
// handler off a queue thread (none should: they all come on the ring)
// answers EIO.
#pragma once

#include <cstdint>
#include <memory>

#include "fuse/channel/ring_companion.h"
#include "fuse/protocol/handler.h"

namespace pvdisk::bench {

// The image I/O of one FUSE queue thread. Made by FloorDisk::MakeCompanion.
class FloorDiskQueue;

class FloorDisk {
 public:
  // `fd`: the image, opened O_DIRECT (not owned; outlives the mount).
  // `depth`: the FUSE queue depth (at most that many requests per queue).
  FloorDisk(int fd, uint32_t depth) : fd_(fd), depth_(depth) {}

  // For ServeOptions::companion.
  std::unique_ptr<fuse::channel::RingCompanion> MakeCompanion(uint32_t qid);

  // Queue the request's image I/O on the calling queue thread's ring; the
  // reply goes when it completes.
  void Read(const fuse::protocol::Request& request, uint64_t size,
            fuse::protocol::Reply reply);
  void Write(const fuse::protocol::Request& request, uint64_t size,
             fuse::protocol::Reply reply);

 private:
  const int fd_;
  const uint32_t depth_;
};

}  // namespace pvdisk::bench

// CacheWriter: how a volatile write cache (io/volatile_cache.h) puts the
// data it held into the image file, and syncs it.
//
// A write-out is a set of disjoint pieces (the newest data of each byte,
// from the cache's 4096-aligned buffers). They go out through an io_uring
// of the writer's own, up to kCacheWriterDepth writes in flight, pieces
// that touch in the file merged into one write of several buffers (at most
// kCacheWriterOpBytes each). On an image open with O_DIRECT the data goes
// straight from the cache's buffers to the device, as the plain disk's own
// writes do; Sync is one IORING_OP_FSYNC (DATASYNC).
//
// Pieces O_DIRECT cannot take (an offset, length or address that is not a
// multiple of kCacheWriterDirectAlign; or a write the file system refused
// with EINVAL) go through a second, buffered descriptor of the same file,
// and only after every direct write of the same call has completed: a
// buffered write that shares a page with a direct write in flight could
// write that page's old bytes back over it later. (The kernel keeps the
// two coherent otherwise: a direct read or write first writes back the
// dirty pages of its range.) Read-modify-write of the edge blocks is not
// used: it would read bytes outside the pieces, which a discard on another
// queue may be changing at the same time.
//
// If this kernel gives no io_uring, the same writes are made one at a time
// with pwritev(2) and the sync with fdatasync(2).
//
// One thread at a time (the cache hands the writer over under its lock).
#pragma once

#include <liburing.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pvdisk::io {

// Writes in flight at once, and the most bytes one of them carries.
inline constexpr unsigned kCacheWriterDepth = 32;
inline constexpr uint64_t kCacheWriterOpBytes = 1 << 20;
// What O_DIRECT on the image accepts: ImageFile keeps O_DIRECT only where
// 512-byte offsets, lengths and addresses work (io/image_file.cc).
inline constexpr uint64_t kCacheWriterDirectAlign = 512;

class CacheWriter {
 public:
  // `length` bytes at `offset` of the file from `data`.
  struct Piece {
    uint64_t offset = 0;
    const uint8_t* data = nullptr;
    uint64_t length = 0;
  };

  // Over the file open as `fd` (not owned; open while the writer lives).
  explicit CacheWriter(int fd);
  ~CacheWriter();
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  // Writes every piece; `pieces` must not overlap one another (their order
  // in the file does not matter, ascending offsets merge best). Returns 0
  // or the first negative errno; after an error the pieces not yet written
  // are not started.
  int Write(const std::vector<Piece>& pieces);
  // Makes what was written durable (fdatasync). 0 or a negative errno.
  int Sync();

  // For tests and the daemon's log: whether writes go through io_uring,
  // whether the file is open with O_DIRECT, and how many pieces went the
  // buffered way since the writer was made.
  bool uses_ring() const { return ring_ok_; }
  bool direct() const { return direct_; }
  uint64_t buffered_pieces() const { return buffered_pieces_; }

 private:
  // One write: iov_[first, end) contiguous in the file from `offset`.
  struct Op {
    uint64_t offset;
    size_t first;
    size_t end;
    bool direct;
  };

  // Appends the ops of `pieces` that `direct` selects to ops_ and iov_.
  void Plan(const std::vector<Piece>& pieces, bool direct);
  // Writes ops_ through `fd`; ops that O_DIRECT refused go to `refused`.
  int Run(int fd, std::vector<Piece>* refused);
  int RunOnRing(int fd, std::vector<Piece>* refused);
  int RunSync(int fd, std::vector<Piece>* refused);
  // Moves op `op`'s iovecs past `done` bytes; true when nothing is left.
  bool Advance(Op& op, uint64_t done);
  void Refuse(const Op& op, std::vector<Piece>* refused) const;
  bool DirectAligned(const Piece& piece) const;
  // The buffered descriptor, opened on first use; -errno if it cannot be.
  int BufferedFd();

  const int fd_;
  bool direct_ = false;
  int buffered_fd_ = -1;  // owned once opened; fd_ itself when not direct
  io_uring ring_ = {};
  bool ring_ok_ = false;
  uint64_t buffered_pieces_ = 0;
  // The call's plan, reused from call to call.
  std::vector<Op> ops_;
  std::vector<iovec> iov_;
};

}  // namespace pvdisk::io

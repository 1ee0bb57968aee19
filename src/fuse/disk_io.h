// DiskIo: byte-addressed reads, writes, flushes and discards on one disk, as
// a regular file of the image's size would behave, turned into sector-based
// BlockIos on the disk's queue.
//
// - Reads at or past the end return 0 bytes; reads crossing it are cut short.
// - Writes that would end past the end fail with -ENOSPC and change nothing.
// - Unaligned writes become read-modify-write cycles, serialised per sector
//   range by a RangeLock so that two of them never lose each other's bytes.
//
// Every operation is asynchronous: it returns at once and calls `done`
// exactly once, usually from the queue's completion thread.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>

#include "absl/types/span.h"
#include "fuse/disk.h"
#include "fuse/range_lock.h"

namespace pvdisk::fuse {

class DiskIo {
 public:
  // `result`: bytes transferred, or a negative errno. For reads, `data` holds
  // the bytes (valid only during the call).
  using ReadDone =
      std::function<void(int64_t result, absl::Span<const iovec> data)>;
  using Done = std::function<void(int64_t result)>;

  // `disk` must outlive this object.
  explicit DiskIo(Disk* disk) : disk_(disk) {}

  // Every operation goes, whole, to `queue` (one of the disk's queues, as
  // chosen by the caller with Disk::QueueFor).
  void Read(transport::Queue& queue, uint64_t offset, uint64_t length,
            ReadDone done);
  // `data` is needed only until Write() returns.
  void Write(transport::Queue& queue, uint64_t offset, const uint8_t* data,
             uint64_t length, Done done);
  // Makes completed writes durable. Reports 0 on success.
  void Flush(transport::Queue& queue, Done done);
  // After it, [offset, offset + length) reads as zeros. `deallocate` punches
  // a hole; otherwise the space stays allocated. Parts of the range past the
  // end are ignored. Reports 0 on success.
  void Zero(transport::Queue& queue, uint64_t offset, uint64_t length,
            bool deallocate, Done done);

  Disk& disk() { return *disk_; }

 private:
  struct ReadModifyWrite;
  void StartReadModifyWrite(ReadModifyWrite* rmw);
  void WriteBack(ReadModifyWrite* rmw);
  void SubmitWrite(transport::Queue& queue, uint64_t first_sector,
                   uint64_t sectors, const uint8_t* data,
                   std::function<void(int)> done);

  Disk* disk_;
  RangeLock rmw_lock_;
};

}  // namespace pvdisk::fuse

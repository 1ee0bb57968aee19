// DiskIo: byte-addressed reads, writes, flushes and discards on one disk, as
// a regular file of the image's size would behave, turned into sector-based
// BlockIos on the disk's queue.
//
// - Reads at or past the end return 0 bytes; reads crossing it are cut short.
// - Writes that would end past the end fail with -ENOSPC and change nothing.
// - Unaligned writes become read-modify-write (RMW) cycles. WriteOrder keeps
//   every other write, discard or write-zeroes of their sectors out of the
//   way while they run, so an RMW never writes old bytes back over newer
//   ones (src/fuse/write_order.h).
//
// Every operation is asynchronous: it returns at once and calls `done`
// exactly once, usually from the queue's completion thread. Each one counts
// in the disk's OperationsInFlight from the call until `done` has returned,
// so Disk::Shutdown can wait for all of them (even those waiting for the
// write order) before it stops the queues.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <span>

#include "absl/types/span.h"
#include "fuse/disk.h"
#include "fuse/write_order.h"
#include "transport/block_io.h"

namespace pvdisk::fuse {

class DiskIo {
 public:
  // `result`: bytes transferred, or a negative errno.
  using Done = std::function<void(int64_t result)>;

  // A read in flight: the caller makes one (a subclass holding whatever its
  // answer needs) and hands it to Read(), which fills in the block request.
  // The read then lives in this one object, from the request to the answer:
  // no other allocation on its path (the 4 KiB job's profile found eight
  // per read when these were std::functions around a separate BlockIo).
  class ReadOp : public transport::BlockIo {
   public:
    // Called once. `result`: bytes read, or a negative errno; `data` holds
    // the bytes (valid only during the call). May delete the object.
    virtual void ReadDone(int64_t result, absl::Span<const iovec> data) = 0;

   protected:
    ~ReadOp() = default;

   private:
    friend class DiskIo;
    void Complete(int result,
                  absl::Span<const transport::DataPiece> pieces) final;
    size_t skip_ = 0;      // bytes of the first sector before the wanted ones
    uint64_t length_ = 0;  // bytes wanted
    OperationsInFlight* operations_ = nullptr;
  };

  // A write in flight, made by the caller likewise. An aligned write that
  // nothing orders is this one block request; other writes (unaligned ones,
  // those behind a read-modify-write) take a slower path and report here.
  class WriteOp : public transport::BlockIo {
   public:
    // Called once. `result`: bytes written, or a negative errno. May delete
    // the object.
    virtual void WriteDone(int64_t result) = 0;

   protected:
    ~WriteOp() = default;

   private:
    friend class DiskIo;
    void Complete(int result,
                  absl::Span<const transport::DataPiece> pieces) final;
    DiskIo* disk_io_ = nullptr;
    WriteOrder::Hold hold_{};
    uint64_t length_ = 0;
  };

  // `disk` must outlive this object.
  explicit DiskIo(Disk* disk) : disk_(disk) {}

  // Every operation goes, whole, to `queue` (one of the disk's queues, as
  // chosen by the caller with Disk::QueueFor).
  // `into` (may be empty): where the caller will send the bytes from (the
  // FUSE reply's own buffer). A read of whole sectors that fits is asked to
  // land there (BlockIo::read_into), and then `data` points into it. It
  // must stay valid until ReadDone has returned. `op` must stay valid until
  // its ReadDone is called.
  void Read(transport::Queue& queue, uint64_t offset, uint64_t length,
            std::span<uint8_t> into, ReadOp* op);
  // `data` is needed only until Write() returns (unless the queue's lent
  // memory holds it: see BlockIo::write_data). `op` must stay valid until
  // its WriteDone is called.
  void Write(transport::Queue& queue, uint64_t offset, const uint8_t* data,
             uint64_t length, WriteOp* op);
  // The same with a function to call (a rarely taken path: it allocates).
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
  void FinishReadModifyWrite(ReadModifyWrite* rmw, int64_t result);
  // A plain (aligned) write, discard or write-zeroes of whole sectors, once
  // WriteOrder lets it go; `done` gets the BlockIo's result.
  // `data` (for kWrite) is needed only until the call returns.
  void SubmitPlainWrite(transport::Queue& queue, transport::BlockOp op,
                        uint64_t first_sector, uint64_t sectors,
                        const uint8_t* data, std::function<void(int)> done);
  // The same once TryAcquireWrite has refused: waits (with a copy of
  // `data`) until WriteOrder lets it go.
  void SubmitWhenOrdered(transport::Queue& queue, transport::BlockOp op,
                         uint64_t first_sector, uint64_t sectors,
                         const uint8_t* data, std::function<void(int)> done);
  // Submits a write whose WriteOrder hold it already has; releases the hold
  // when the write completes, before `done`.
  void SubmitHeld(transport::Queue& queue, transport::BlockOp op,
                  const WriteOrder::Hold& hold, const uint8_t* data,
                  std::function<void(int)> done);
  // Calls `done` with `result`, then ends the operation's count.
  void Finish(const Done& done, int64_t result);
  // The same for a WriteOp.
  void Finish(WriteOp* op, int64_t result);

  Disk* disk_;
  WriteOrder write_order_;
};

}  // namespace pvdisk::fuse

#include "fuse/disk_io.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "transport/block_io.h"

namespace pvdisk::fuse {
namespace {

using transport::BlockIo;
using transport::BlockOp;
using transport::DataPiece;
using transport::kSectorSize;

// A BlockIo that hands its result to a function and deletes itself.
class CallbackIo final : public BlockIo {
 public:
  using Callback = std::function<void(int, absl::Span<const DataPiece>)>;
  CallbackIo(BlockOp block_op, uint64_t first, uint64_t count,
             Callback callback)
      : callback_(std::move(callback)) {
    op = block_op;
    sector = first;
    num_sectors = count;
  }
  void Complete(int result, absl::Span<const DataPiece> data) override {
    callback_(result, data);
    delete this;
  }

 private:
  Callback callback_;
};

void Submit(transport::Queue& queue, BlockIo* io) {
  queue.frontend().Submit(io);
}

// Counts down the parts of one operation and reports once: the first error,
// or `success`.
class Joiner {
 public:
  Joiner(int parts, int64_t success, DiskIo::Done done)
      : remaining_(parts), success_(success), done_(std::move(done)) {}
  void PartDone(int result) {
    if (result < 0) {
      int expected = 0;
      error_.compare_exchange_strong(expected, result);
    }
    if (remaining_.fetch_sub(1) == 1) {
      int error = error_.load();
      done_(error < 0 ? error : success_);
      delete this;
    }
  }

 private:
  std::atomic<int> remaining_;
  std::atomic<int> error_{0};
  int64_t success_;
  DiskIo::Done done_;
};

}  // namespace

struct DiskIo::ReadModifyWrite {
  uint64_t first_sector;  // the sectors the write touches
  uint64_t sectors;
  size_t head;      // bytes of the first sector before the new data
  uint64_t length;  // bytes of new data
  std::unique_ptr<uint8_t[]> buffer;  // the whole sectors, new data in place
  Done done;
  transport::Queue* queue;  // where all its parts go
  WriteOrder::Hold hold;    // set when WriteOrder lets it start
};

void DiskIo::Finish(const Done& done, int64_t result) {
  done(result);
  disk_->operations().End();
}

void DiskIo::ReadOp::Complete(int result, absl::Span<const DataPiece> pieces) {
  // ReadDone may delete this object.
  OperationsInFlight* operations = operations_;
  if (result < 0) {
    ReadDone(result, {});
    operations->End();
    return;
  }
  // The caller wants `length_` bytes from `skip_` on.
  absl::InlinedVector<iovec, 8> iov;
  size_t to_skip = skip_;
  uint64_t wanted = length_;
  for (const DataPiece& piece : pieces) {
    if (wanted == 0) break;
    if (to_skip >= piece.length) {
      to_skip -= piece.length;
      continue;
    }
    size_t take = std::min<uint64_t>(piece.length - to_skip, wanted);
    iov.push_back(iovec{const_cast<uint8_t*>(piece.data) + to_skip, take});
    wanted -= take;
    to_skip = 0;
  }
  ReadDone(static_cast<int64_t>(length_), iov);
  operations->End();
}

void DiskIo::Read(transport::Queue& queue, uint64_t offset, uint64_t length,
                  std::span<uint8_t> into, ReadOp* op) {
  OperationsInFlight& operations = disk_->operations();
  operations.Begin();
  uint64_t size = disk_->size_bytes();
  if (offset >= size || length == 0) {
    op->ReadDone(0, {});
    operations.End();
    return;
  }
  length = std::min(length, size - offset);
  uint64_t first = offset / kSectorSize;
  uint64_t end = (offset + length + kSectorSize - 1) / kSectorSize;
  op->op = BlockOp::kRead;
  op->sector = first;
  op->num_sectors = end - first;
  op->skip_ = offset % kSectorSize;
  op->length_ = length;
  op->operations_ = &operations;
  // Whole sectors from the start of the buffer: the caller's bytes are the
  // sectors' bytes (the queue uses the buffer only if its lent memory holds
  // it).
  op->read_into = op->skip_ == 0 && (end - first) * kSectorSize <= into.size()
                      ? into.data()
                      : nullptr;
  Submit(queue, op);
}

void DiskIo::SubmitPlainWrite(transport::Queue& queue, BlockOp op,
                              uint64_t first_sector, uint64_t sectors,
                              const uint8_t* data,
                              std::function<void(int)> done) {
  // The common case: no RMW in these stripes, no lock, no copy.
  if (std::optional<WriteOrder::Hold> hold =
          write_order_.TryAcquireWrite(first_sector, sectors)) {
    SubmitHeld(queue, op, *hold, data, std::move(done));
    return;
  }
  SubmitWhenOrdered(queue, op, first_sector, sectors, data, std::move(done));
}

void DiskIo::SubmitWhenOrdered(transport::Queue& queue, BlockOp op,
                               uint64_t first_sector, uint64_t sectors,
                               const uint8_t* data,
                               std::function<void(int)> done) {
  // An RMW is near: this write may have to wait for it, after the caller's
  // data has gone, so it waits with a copy.
  std::shared_ptr<uint8_t[]> copy;
  if (data != nullptr) {
    copy.reset(new uint8_t[sectors * kSectorSize]);
    std::memcpy(copy.get(), data, sectors * kSectorSize);
  }
  write_order_.AcquireWrite(first_sector, sectors,
                            [this, &queue, op, copy, done = std::move(done)](
                                const WriteOrder::Hold& hold) {
                              SubmitHeld(queue, op, hold, copy.get(), done);
                            });
}

void DiskIo::SubmitHeld(transport::Queue& queue, BlockOp op,
                        const WriteOrder::Hold& hold, const uint8_t* data,
                        std::function<void(int)> done) {
  auto* io = new CallbackIo(op, hold.first, hold.count,
                            [this, hold, done = std::move(done)](
                                int result, absl::Span<const DataPiece>) {
                              write_order_.Release(hold);
                              done(result);
                            });
  io->write_data = data;
  Submit(queue, io);
}

void DiskIo::WriteOp::Complete(int result, absl::Span<const DataPiece>) {
  DiskIo* disk_io = disk_io_;
  disk_io->write_order_.Release(hold_);
  disk_io->Finish(this, result < 0 ? result : static_cast<int64_t>(length_));
}

void DiskIo::Finish(WriteOp* op, int64_t result) {
  op->WriteDone(result);  // may delete op
  disk_->operations().End();
}

namespace {

// A WriteOp that calls a function and deletes itself.
class FunctionWrite final : public DiskIo::WriteOp {
 public:
  explicit FunctionWrite(DiskIo::Done done) : done_(std::move(done)) {}
  void WriteDone(int64_t result) override {
    done_(result);
    delete this;
  }

 private:
  DiskIo::Done done_;
};

}  // namespace

void DiskIo::Write(transport::Queue& queue, uint64_t offset,
                   const uint8_t* data, uint64_t length, Done done) {
  Write(queue, offset, data, length, new FunctionWrite(std::move(done)));
}

void DiskIo::Write(transport::Queue& queue, uint64_t offset,
                   const uint8_t* data, uint64_t length, WriteOp* op) {
  disk_->operations().Begin();
  uint64_t size = disk_->size_bytes();
  if (offset > size || length > size - offset) {
    Finish(op, -ENOSPC);
    return;
  }
  if (length == 0) {
    Finish(op, 0);
    return;
  }
  if (offset % kSectorSize == 0 && length % kSectorSize == 0) {
    uint64_t first = offset / kSectorSize;
    uint64_t sectors = length / kSectorSize;
    // The common case: no RMW in these stripes, no lock, no copy, and the
    // WriteOp is the block request.
    if (std::optional<WriteOrder::Hold> hold =
            write_order_.TryAcquireWrite(first, sectors)) {
      op->op = BlockOp::kWrite;
      op->sector = hold->first;
      op->num_sectors = hold->count;
      op->write_data = data;
      op->disk_io_ = this;
      op->hold_ = *hold;
      op->length_ = length;
      Submit(queue, op);
      return;
    }
    // Refused: an RMW is registered in these stripes.
    SubmitWhenOrdered(
        queue, BlockOp::kWrite, first, sectors, data,
        [this, length, op](int result) {
          Finish(op, result < 0 ? result : static_cast<int64_t>(length));
        });
    return;
  }
  // Unaligned: build the whole sectors in a private buffer now (the caller's
  // data is only valid until we return), fill in the old bytes around the new
  // ones once they have been read, then write the sectors back.
  auto* rmw = new ReadModifyWrite;
  rmw->first_sector = offset / kSectorSize;
  uint64_t end = (offset + length + kSectorSize - 1) / kSectorSize;
  rmw->sectors = end - rmw->first_sector;
  rmw->head = offset % kSectorSize;
  rmw->length = length;
  rmw->buffer = std::make_unique<uint8_t[]>(rmw->sectors * kSectorSize);
  std::memcpy(rmw->buffer.get() + rmw->head, data, length);
  rmw->done = [op](int64_t result) { op->WriteDone(result); };
  rmw->queue = &queue;
  write_order_.AcquireReadModifyWrite(
      rmw->first_sector, rmw->sectors,
      [this, rmw](const WriteOrder::Hold& hold) {
        rmw->hold = hold;
        StartReadModifyWrite(rmw);
      });
}

void DiskIo::StartReadModifyWrite(ReadModifyWrite* rmw) {
  transport::Queue& queue = *rmw->queue;
  // Only the first and the last sector hold old bytes that must survive.
  size_t tail_start = rmw->head + rmw->length;  // first old byte at the end
  size_t total = rmw->sectors * kSectorSize;
  bool need_head = rmw->head != 0;
  bool need_tail = tail_start != total;
  uint64_t last = rmw->first_sector + rmw->sectors - 1;
  struct Part {
    uint64_t sector;
  };
  std::vector<Part> parts;
  if (need_head) parts.push_back({rmw->first_sector});
  if (need_tail && !(need_head && last == rmw->first_sector)) {
    parts.push_back({last});
  }
  auto* joiner = new Joiner(static_cast<int>(parts.size()), 0,
                            [this, rmw](int64_t result) {
                              if (result < 0) {
                                FinishReadModifyWrite(rmw, result);
                                return;
                              }
                              WriteBack(rmw);
                            });
  for (const Part& part : parts) {
    Submit(queue,
           new CallbackIo(BlockOp::kRead, part.sector, 1,
                          [rmw, joiner, part, tail_start, total](
                              int result, absl::Span<const DataPiece> pieces) {
                            if (result == 0) {
                              const uint8_t* old = pieces[0].data;
                              size_t base = (part.sector - rmw->first_sector) *
                                            kSectorSize;
                              // Old bytes of this sector that lie outside the
                              // new data.
                              for (size_t i = 0; i < kSectorSize; ++i) {
                                size_t at = base + i;
                                if (at < rmw->head ||
                                    (at >= tail_start && at < total)) {
                                  rmw->buffer[at] = old[i];
                                }
                              }
                            }
                            joiner->PartDone(result);
                          }));
  }
}

void DiskIo::WriteBack(ReadModifyWrite* rmw) {
  auto* io = new CallbackIo(
      BlockOp::kWrite, rmw->first_sector, rmw->sectors,
      [this, rmw](int result, absl::Span<const DataPiece>) {
        FinishReadModifyWrite(
            rmw, result < 0 ? result : static_cast<int64_t>(rmw->length));
      });
  io->write_data = rmw->buffer.get();
  Submit(*rmw->queue, io);
}

void DiskIo::FinishReadModifyWrite(ReadModifyWrite* rmw, int64_t result) {
  write_order_.Release(rmw->hold);
  Done done = std::move(rmw->done);
  delete rmw;
  Finish(done, result);
}

void DiskIo::Flush(transport::Queue& queue, Done done) {
  disk_->operations().Begin();
  Submit(queue, new CallbackIo(BlockOp::kFlush, 0, 0,
                               [this, done = std::move(done)](
                                   int result, absl::Span<const DataPiece>) {
                                 Finish(done, result);
                               }));
}

void DiskIo::Zero(transport::Queue& queue, uint64_t offset, uint64_t length,
                  bool deallocate, Done done) {
  disk_->operations().Begin();
  uint64_t size = disk_->size_bytes();
  if (offset >= size || length == 0) {
    Finish(done, 0);
    return;
  }
  length = std::min(length, size - offset);
  uint64_t end = offset + length;
  // Whole sectors inside the range go as one discard / write-zeroes request;
  // the partial sectors at either edge are written with zeros.
  uint64_t inner_first = (offset + kSectorSize - 1) / kSectorSize;
  uint64_t inner_end = end / kSectorSize;
  static const uint8_t kZeros[kSectorSize] = {};
  struct Edge {
    uint64_t offset;
    uint64_t length;
  };
  std::vector<Edge> edges;
  if (inner_first >= inner_end) {
    // No whole sector inside: the range is within one or two sectors and
    // shorter than two sectors; write zeros over it piecewise.
    for (uint64_t at = offset; at < end;) {
      uint64_t piece =
          std::min<uint64_t>(end - at, kSectorSize - at % kSectorSize);
      edges.push_back({at, piece});
      at += piece;
    }
  } else {
    if (offset < inner_first * kSectorSize) {
      edges.push_back({offset, inner_first * kSectorSize - offset});
    }
    if (inner_end * kSectorSize < end) {
      edges.push_back({inner_end * kSectorSize, end - inner_end * kSectorSize});
    }
  }
  bool has_inner = inner_first < inner_end;
  auto* joiner = new Joiner(
      static_cast<int>(edges.size()) + (has_inner ? 1 : 0), 0,
      [this, done = std::move(done)](int64_t result) { Finish(done, result); });
  if (has_inner) {
    SubmitPlainWrite(queue,
                     deallocate ? BlockOp::kDiscard : BlockOp::kWriteZeroes,
                     inner_first, inner_end - inner_first, nullptr,
                     [joiner](int result) { joiner->PartDone(result); });
  }
  for (const Edge& edge : edges) {
    Write(queue, edge.offset, kZeros, edge.length, [joiner](int64_t result) {
      joiner->PartDone(result < 0 ? static_cast<int>(result) : 0);
    });
  }
}

}  // namespace pvdisk::fuse

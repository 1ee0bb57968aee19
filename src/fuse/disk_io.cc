#include "fuse/disk_io.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

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
};

void DiskIo::Read(transport::Queue& queue, uint64_t offset, uint64_t length,
                  ReadDone done) {
  uint64_t size = disk_->size_bytes();
  if (offset >= size || length == 0) {
    done(0, {});
    return;
  }
  length = std::min(length, size - offset);
  uint64_t first = offset / kSectorSize;
  uint64_t end = (offset + length + kSectorSize - 1) / kSectorSize;
  size_t skip = offset % kSectorSize;
  Submit(queue, new CallbackIo(
                    BlockOp::kRead, first, end - first,
                    [skip, length, done = std::move(done)](
                        int result, absl::Span<const DataPiece> pieces) {
                      if (result < 0) {
                        done(result, {});
                        return;
                      }
                      // The caller wants `length` bytes from `skip` on.
                      std::vector<iovec> iov;
                      iov.reserve(pieces.size());
                      size_t to_skip = skip;
                      uint64_t wanted = length;
                      for (const DataPiece& piece : pieces) {
                        if (wanted == 0) break;
                        if (to_skip >= piece.length) {
                          to_skip -= piece.length;
                          continue;
                        }
                        size_t take =
                            std::min<uint64_t>(piece.length - to_skip, wanted);
                        iov.push_back(iovec{
                            const_cast<uint8_t*>(piece.data) + to_skip, take});
                        wanted -= take;
                        to_skip = 0;
                      }
                      done(static_cast<int64_t>(length), iov);
                    }));
}

void DiskIo::SubmitWrite(transport::Queue& queue, uint64_t first_sector,
                         uint64_t sectors, const uint8_t* data,
                         std::function<void(int)> done) {
  auto* io = new CallbackIo(
      BlockOp::kWrite, first_sector, sectors,
      [done = std::move(done)](int result, absl::Span<const DataPiece>) {
        done(result);
      });
  io->write_data = data;
  Submit(queue, io);
}

void DiskIo::Write(transport::Queue& queue, uint64_t offset,
                   const uint8_t* data, uint64_t length, Done done) {
  uint64_t size = disk_->size_bytes();
  if (offset > size || length > size - offset) {
    done(-ENOSPC);
    return;
  }
  if (length == 0) {
    done(0);
    return;
  }
  if (offset % kSectorSize == 0 && length % kSectorSize == 0) {
    SubmitWrite(queue, offset / kSectorSize, length / kSectorSize, data,
                [length, done = std::move(done)](int result) {
                  done(result < 0 ? result : static_cast<int64_t>(length));
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
  rmw->done = std::move(done);
  rmw->queue = &queue;
  rmw_lock_.Acquire(rmw->first_sector, rmw->sectors,
                    [this, rmw] { StartReadModifyWrite(rmw); });
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
  auto* joiner = new Joiner(
      static_cast<int>(parts.size()), 0, [this, rmw](int64_t result) {
        if (result < 0) {
          rmw_lock_.Release(rmw->first_sector, rmw->sectors);
          rmw->done(result);
          delete rmw;
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
  SubmitWrite(
      *rmw->queue, rmw->first_sector, rmw->sectors, rmw->buffer.get(),
      [this, rmw](int result) {
        rmw_lock_.Release(rmw->first_sector, rmw->sectors);
        rmw->done(result < 0 ? result : static_cast<int64_t>(rmw->length));
        delete rmw;
      });
}

void DiskIo::Flush(transport::Queue& queue, Done done) {
  Submit(queue, new CallbackIo(BlockOp::kFlush, 0, 0,
                               [done = std::move(done)](
                                   int result, absl::Span<const DataPiece>) {
                                 done(result);
                               }));
}

void DiskIo::Zero(transport::Queue& queue, uint64_t offset, uint64_t length,
                  bool deallocate, Done done) {
  uint64_t size = disk_->size_bytes();
  if (offset >= size || length == 0) {
    done(0);
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
      static_cast<int>(edges.size()) + (has_inner ? 1 : 0), 0, std::move(done));
  if (has_inner) {
    Submit(queue, new CallbackIo(
                      deallocate ? BlockOp::kDiscard : BlockOp::kWriteZeroes,
                      inner_first, inner_end - inner_first,
                      [joiner](int result, absl::Span<const DataPiece>) {
                        joiner->PartDone(result);
                      }));
  }
  for (const Edge& edge : edges) {
    Write(queue, edge.offset, kZeros, edge.length, [joiner](int64_t result) {
      joiner->PartDone(result < 0 ? static_cast<int>(result) : 0);
    });
  }
}

}  // namespace pvdisk::fuse

#include "transport/nvme/driver_ring.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "transport/nvme/data_pointer.h"
#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

using namespace nvme;  // NOLINT: the protocol's own names

// What a driver makes of a status (as Linux's nvme_error_status): not
// supported for an opcode or field the device refuses, else an I/O error.
int ResultOf(uint16_t status) {
  switch (status) {
    case kScSuccess:
      return 0;
    case kScInvalidOpcode:
      return -EOPNOTSUPP;
    default:
      return -EIO;
  }
}

}  // namespace

NvmeDriverRing::NvmeDriverRing(uint8_t* ring_memory, uint32_t size,
                               uint8_t* data_memory, const RingConfig& config)
    : q_(ring_memory, size),
      size_(size),
      mask_(size - 1),
      data_(data_memory),
      notify_(config.notify),
      data_pointer_(config.data_pointer),
      request_of_(size, kNoRequest) {
  // Zero: every doorbell and EventIdx at position 0 ("notify at the first
  // entry", as a zeroed virtio event index), no completion in phase 1.
  std::memset(ring_memory, 0, q_.layout().bytes);
  FullBarrier();
}

uint64_t NvmeDriverRing::MaxRangeSectors(BlockOp op) const {
  // Write Zeroes: a 16-bit block count. Dataset Management: a 32-bit one,
  // rounded down to whole pages so that long aligned ranges stay aligned.
  return op == BlockOp::kWriteZeroes ? kMaxBlocksPerCommand : 0xFFFFFFF8u;
}

void NvmeDriverRing::Write(const RingRequest& request) {
  const uint16_t command_id = static_cast<uint16_t>(request.id & mask_);
  assert(in_flight_ < size_ - 1 && request_of_[command_id] == kNoRequest);
  Command command{};
  command.command_id = command_id;
  command.nsid = kNamespaceId;
  const uint64_t slba = request.sector;
  switch (request.op) {
    case BlockOp::kFlush:
      command.opcode = kOpFlush;
      break;
    case BlockOp::kRead:
    case BlockOp::kWrite:
      command.opcode = request.op == BlockOp::kRead ? kOpRead : kOpWrite;
      command.cdw10 = static_cast<uint32_t>(slba);
      command.cdw11 = static_cast<uint32_t>(slba >> 32);
      command.cdw12 = static_cast<uint32_t>(request.num_sectors - 1);
      if (data_pointer_ == DataPointerMode::kPrp) {
        EncodePrp(request.segments, request.segment_count, request.table_pages,
                  data_, &command);
      } else {
        EncodeSgl(request.segments, request.segment_count, request.table_pages,
                  data_, &command);
      }
      break;
    case BlockOp::kWriteZeroes:
      command.opcode = kOpWriteZeroes;
      command.cdw10 = static_cast<uint32_t>(slba);
      command.cdw11 = static_cast<uint32_t>(slba >> 32);
      command.cdw12 = static_cast<uint32_t>(request.num_sectors - 1);
      break;
    case BlockOp::kDiscard: {
      command.opcode = kOpDatasetManagement;
      command.cdw11 = kDsmAttributeDeallocate;
      const uint64_t addr = uint64_t{request.table_pages[0]} * nvme::kPageSize;
      const DsmRange range{0, static_cast<uint32_t>(request.num_sectors), slba};
      std::memcpy(data_ + addr, &range, sizeof(range));
      if (data_pointer_ == DataPointerMode::kPrp) {
        command.dptr[0] = addr;
      } else {
        SglDescriptor d{};
        d.addr = addr;
        d.length = sizeof(DsmRange);
        d.id = kSglDataBlock;
        command.flags = kPsdtSgl;
        std::memcpy(command.dptr, &d, sizeof(d));
      }
      break;
    }
  }
  std::memcpy(&q_.Sq(sq_tail_ & mask_), &command, sizeof(command));
  request_of_[command_id] = static_cast<uint32_t>(request.id);
  ++sq_tail_;
  ++in_flight_;
}

PushResult NvmeDriverRing::Publish() {
  if (sq_tail_ == sq_published_) return PushResult::kNothing;
  StoreRelease(q_.Bells().sq_tail, sq_tail_ & mask_);
  FullBarrier();  // the doorbell stored before reading the EventIdx
  const uint32_t old = sq_published_;
  sq_published_ = sq_tail_;
  if (notify_ == NotifyMode::kAlways) return PushResult::kNotify;
  const uint32_t event = LoadAcquire(q_.Bells().sq_event);
  return NeedEvent(event, sq_tail_, old, size_) ? PushResult::kNotify
                                                : PushResult::kSuppressed;
}

bool NvmeDriverRing::CompletionWaiting() {
  const uint16_t status = q_.LoadStatus(cq_head_ & mask_);
  return (status & 1) == (((cq_head_ / size_) & 1) == 0 ? 1 : 0);
}

int NvmeDriverRing::ConsumeResponses(
    absl::FunctionRef<void(uint64_t id, int result)> on_response) {
  int consumed = 0;
  while (CompletionWaiting()) {
    Completion c;
    std::memcpy(&c, &q_.Cq(cq_head_ & mask_), sizeof(c));
    // The device is a stranger too.
    if (c.command_id >= size_ || request_of_[c.command_id] == kNoRequest) {
      if (consumed > 0) break;
      return -EPROTO;
    }
    const uint32_t request = request_of_[c.command_id];
    request_of_[c.command_id] = kNoRequest;
    ++cq_head_;
    --in_flight_;
    ++consumed;
    on_response(request, ResultOf(StatusOf(c.status)));
  }
  if (consumed > 0) StoreRelease(q_.Bells().cq_head, cq_head_ & mask_);
  return consumed;
}

bool NvmeDriverRing::FinalCheckForResponses() {
  if (CompletionWaiting()) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    StoreRelease(q_.Bells().cq_event, cq_head_ & mask_);
  }
  FullBarrier();
  return CompletionWaiting();
}

}  // namespace pvdisk::transport

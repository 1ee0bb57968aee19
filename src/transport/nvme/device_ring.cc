#include "transport/nvme/device_ring.h"

#include <cerrno>
#include <cstring>

#include "stats/clock.h"
#include "stats/queue_stats.h"
#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

using namespace nvme;  // NOLINT: the protocol's own names

// Above the 32 bits a trace takes as the ring request id (the command id).
constexpr uint64_t kHoldsId = uint64_t{1} << 32;

// The phase tag of the completion at free-running position `position`: 1
// on the first lap.
bool PhaseOf(uint32_t position, uint32_t size) {
  return ((position / size) & 1) == 0;
}

// The status answering `request` with backend result `result`.
uint16_t StatusFor(const DeviceRequest& request, int result) {
  if (result == 0) return kScSuccess;
  if (result == -EOPNOTSUPP) return kScInvalidOpcode;
  if (result == -EINVAL && request.reply_offset != kScSuccess) {
    return static_cast<uint16_t>(request.reply_offset);
  }
  switch (request.op) {
    case BlockOp::kRead:
      return kScUnrecoveredReadError;
    case BlockOp::kWrite:
    case BlockOp::kWriteZeroes:
    case BlockOp::kDiscard:
      return kScWriteFault;
    default:
      return kScInternalError;
  }
}

}  // namespace

NvmeDeviceRing::NvmeDeviceRing(uint8_t* ring_memory, uint32_t size,
                               GrantMapper* grants, const DeviceLimits& limits,
                               const RingConfig& config)
    : q_(ring_memory, size),
      size_(size),
      mask_(size - 1),
      area_(grants, limits.data_pages),
      decoder_(&area_, limits.max_segments),
      limits_(limits),
      notify_(config.notify),
      coalescer_(config.coalesce),
      stats_(config.stats),
      id_in_flight_(size_t{1} << 16, false) {
  pending_status_.reserve(size);
}

bool NvmeDeviceRing::LoadSqTail(uint32_t* tail) {
  *tail = LoadAcquire(q_.Bells().sq_tail);
  return *tail < size_;
}

bool NvmeDeviceRing::UpdateCqHead() {
  const uint32_t head = LoadAcquire(q_.Bells().cq_head);
  if (head >= size_) return false;
  const uint32_t consumed = (head - cq_head_) & mask_;
  if (consumed > cq_published_ - cq_head_) return false;
  cq_head_ += consumed;
  return true;
}

bool NvmeDeviceRing::HasRequests() {
  uint32_t tail;
  // An impossible doorbell is news too: TakeRequest reports it.
  if (!LoadSqTail(&tail) || !UpdateCqHead()) return true;
  return tail != (sq_head_ & mask_) && sq_head_ - cq_head_ < size_ - 1;
}

TakeResult NvmeDeviceRing::TakeRequest(DeviceRequest* out) {
  uint32_t tail;
  if (!LoadSqTail(&tail) || !UpdateCqHead()) return TakeResult::kRingBroken;
  if (tail == (sq_head_ & mask_)) return TakeResult::kNone;
  if (sq_head_ - cq_head_ >= size_ - 1) return TakeResult::kNone;
  Command command;
  std::memcpy(&command, &q_.Sq(sq_head_ & mask_), sizeof(command));
  ++sq_head_;
  ++outstanding_;

  out->id = command.command_id;
  out->wire_op = command.opcode;
  out->indirect = false;
  out->op = BlockOp::kFlush;
  out->sector = 0;
  out->num_sectors = 0;
  out->segments.clear();
  out->reply_offset = kScSuccess;
  if (id_in_flight_[command.command_id]) {
    out->reply_offset = kScCommandIdConflict;
    return TakeResult::kInvalid;
  }
  id_in_flight_[command.command_id] = true;
  out->id |= kHoldsId;
  bool answered = false;
  const uint16_t status = Decode(command, out, &answered);
  out->reply_offset = status;
  if (status == kScInvalidOpcode) return TakeResult::kUnsupported;
  if (status != kScSuccess) {
    out->segments.clear();
    return TakeResult::kInvalid;
  }
  if (answered) {
    PutResponse(*out, 0);
    return TakeResult::kAnswered;
  }
  return TakeResult::kValid;
}

bool NvmeDeviceRing::InsideDisk(uint64_t slba, uint64_t blocks) const {
  return slba <= limits_.disk_sectors && blocks <= limits_.disk_sectors - slba;
}

uint16_t NvmeDeviceRing::Decode(const Command& command, DeviceRequest* out,
                                bool* answered) {
  if (command.flags & kFlagsFuseMask) return kScInvalidField;
  switch (command.opcode) {
    case kOpFlush:
      if (command.nsid != kNamespaceId && command.nsid != kAllNamespaces) {
        return kScInvalidNamespace;
      }
      out->op = BlockOp::kFlush;
      return kScSuccess;
    case kOpRead:
    case kOpWrite:
    case kOpWriteZeroes:
      if (command.nsid != kNamespaceId) return kScInvalidNamespace;
      return DecodeData(command, out);
    case kOpDatasetManagement:
      if (command.nsid != kNamespaceId) return kScInvalidNamespace;
      return DecodeDsm(command, out, answered);
    default:
      return kScInvalidOpcode;
  }
}

uint16_t NvmeDeviceRing::DecodeData(const Command& command,
                                    DeviceRequest* out) {
  const bool zeroes = command.opcode == kOpWriteZeroes;
  const uint32_t allowed =
      kCdw12NlbMask | (zeroes ? kCdw12Deallocate : uint32_t{0});
  if (command.cdw12 & ~allowed) return kScInvalidField;
  if (command.opcode != kOpRead && limits_.read_only) return kScReadOnly;
  const uint64_t slba = command.cdw10 | (uint64_t{command.cdw11} << 32);
  const uint64_t blocks = (command.cdw12 & kCdw12NlbMask) + uint64_t{1};
  if (!InsideDisk(slba, blocks)) return kScLbaOutOfRange;
  out->sector = slba;
  out->num_sectors = blocks;
  if (zeroes) {
    out->op = (command.cdw12 & kCdw12Deallocate) ? BlockOp::kDiscard
                                                 : BlockOp::kWriteZeroes;
    return kScSuccess;
  }
  out->op = command.opcode == kOpRead ? BlockOp::kRead : BlockOp::kWrite;
  const uint64_t bytes = blocks * kLbaBytes;
  switch (command.flags & kFlagsPsdtMask) {
    case kPsdtPrp:
      out->indirect = bytes > 2 * uint64_t{nvme::kPageSize} -
                                  command.dptr[0] % nvme::kPageSize;
      return decoder_.DecodePrp(command, bytes, &out->segments);
    case kPsdtSgl: {
      SglDescriptor sgl1;
      std::memcpy(&sgl1, command.dptr, sizeof(sgl1));
      out->indirect = sgl1.id != kSglDataBlock;
      return decoder_.DecodeSgl(command, bytes, &out->segments);
    }
    default:
      return kScInvalidField;
  }
}

uint16_t NvmeDeviceRing::DecodeDsm(const Command& command, DeviceRequest* out,
                                   bool* answered) {
  // One range (NR = 0); attributes: deallocate, and the access hints
  // (integral dataset for read / write, bits 0-1), which need nothing.
  if (command.cdw10 != 0) return kScInvalidField;
  if (command.cdw11 & ~(kDsmAttributeDeallocate | 0x3u)) {
    return kScInvalidField;
  }
  uint64_t addr;
  switch (command.flags & kFlagsPsdtMask) {
    case kPsdtPrp:
      addr = command.dptr[0];
      if (addr % sizeof(DsmRange) != 0) return kScPrpInvalidOffset;
      break;
    case kPsdtSgl: {
      SglDescriptor sgl1;
      std::memcpy(&sgl1, command.dptr, sizeof(sgl1));
      if (sgl1.id != kSglDataBlock) return kScSglInvalidType;
      if (sgl1.length != sizeof(DsmRange)) return kScSglInvalidDataLength;
      if (sgl1.addr % sizeof(DsmRange) != 0) return kScInvalidField;
      addr = sgl1.addr;
      break;
    }
    default:
      return kScInvalidField;
  }
  if (!area_.Inside(addr, sizeof(DsmRange))) return kScDataTransferError;
  DsmRange range;
  if (!area_.CopyFrom(addr, &range, sizeof(range))) {
    return kScDataTransferError;
  }
  if (!(command.cdw11 & kDsmAttributeDeallocate)) {
    *answered = true;  // hints only
    return kScSuccess;
  }
  if (limits_.read_only) return kScReadOnly;
  if (range.num_blocks == 0 || !InsideDisk(range.slba, range.num_blocks)) {
    return kScLbaOutOfRange;
  }
  out->op = BlockOp::kDiscard;
  out->sector = range.slba;
  out->num_sectors = range.num_blocks;
  return kScSuccess;
}

void NvmeDeviceRing::PutResponse(const DeviceRequest& request, int result) {
  const uint32_t entry = cq_tail_ & mask_;
  Completion& c = q_.Cq(entry);
  c.result = 0;
  c.reserved = 0;
  c.sq_head = static_cast<uint16_t>(sq_head_ & mask_);
  c.sq_id = 0;
  c.command_id = static_cast<uint16_t>(request.id);
  pending_status_.emplace_back(
      entry, StatusField(StatusFor(request, result), PhaseOf(cq_tail_, size_)));
  ++cq_tail_;
  --outstanding_;
  if (request.id & kHoldsId) {
    id_in_flight_[static_cast<uint16_t>(request.id)] = false;
  }
}

PushResult NvmeDeviceRing::PublishResponses() {
  if (pending_status_.empty()) return PushResult::kNothing;
  for (const auto& [entry, status] : pending_status_) {
    q_.StoreStatus(entry, status);
  }
  const uint32_t added = static_cast<uint32_t>(pending_status_.size());
  pending_status_.clear();
  cq_published_ = cq_tail_;
  FullBarrier();  // completions handed over before reading the EventIdx
  if (coalescer_.enabled() &&
      coalescer_.Hold(added, outstanding_, stats::MonotonicNanos())) {
    if (stats_ != nullptr) stats_->Add(stats::Counter::irqs_coalesced);
    return PushResult::kSuppressed;
  }
  const uint32_t old = irq_from_;
  irq_from_ = cq_published_;
  if (notify_ == NotifyMode::kAlways) return PushResult::kNotify;
  // Any value: NeedEvent reads it modulo the queue size.
  const uint32_t event = LoadAcquire(q_.Bells().cq_event);
  return NeedEvent(event, cq_published_, old, size_) ? PushResult::kNotify
                                                     : PushResult::kSuppressed;
}

bool NvmeDeviceRing::FinalCheckForRequests() {
  if (HasRequests()) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    StoreRelease(q_.Bells().sq_event, sq_head_ & mask_);
  }
  FullBarrier();
  return HasRequests();
}

}  // namespace pvdisk::transport

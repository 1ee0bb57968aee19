#include "transport/blkif_device_ring.h"

#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {

BlkifDeviceRing::BlkifDeviceRing(uint8_t* ring_memory, uint32_t slots,
                                 uint8_t* data_memory,
                                 const BlkifDeviceLimits& limits)
    : header_(reinterpret_cast<blkif::SharedRingHeader*>(ring_memory)),
      slots_(reinterpret_cast<blkif::Slot*>(ring_memory +
                                            sizeof(blkif::SharedRingHeader))),
      size_(slots),
      data_(data_memory),
      limits_(limits) {}

RingIdx BlkifDeviceRing::Unconsumed(RingIdx prod) const {
  return UnconsumedRequests(prod, req_cons_, rsp_prod_pvt_, size_);
}

TakeResult BlkifDeviceRing::TakeRequest(DeviceRequest* out) {
  RingIdx prod = LoadAcquire(header_->req_prod);
  if (RequestProducerOverflow(prod, rsp_prod_pvt_, size_)) {
    return TakeResult::kRingBroken;
  }
  if (Unconsumed(prod) == 0) return TakeResult::kNone;
  // The one and only read of the shared slot: everything below looks at the
  // private copy, so a frontend changing the slot meanwhile changes nothing.
  blkif::Slot slot;
  std::memcpy(&slot, &slots_[req_cons_ & (size_ - 1)], sizeof(slot));
  ++req_cons_;
  return Decode(slot, out);
}

bool BlkifDeviceRing::RangeInsideDisk(uint64_t sector, uint64_t count) const {
  return sector <= limits_.disk_sectors &&
         count <= limits_.disk_sectors - sector;
}

TakeResult BlkifDeviceRing::Decode(const blkif::Slot& slot,
                                   DeviceRequest* out) const {
  out->id = slot.req.id;
  out->wire_op = slot.req.operation;
  out->segment_count = 0;
  out->iov.clear();
  switch (slot.req.operation) {
    case blkif::kOpRead:
    case blkif::kOpWrite:
      return DecodeReadWrite(slot.req, out);
    case blkif::kOpFlushDiskCache:
      if (slot.req.nr_segments != 0) return TakeResult::kInvalid;
      out->op = BlockOp::kFlush;
      out->sector = 0;
      out->num_sectors = 0;
      return TakeResult::kValid;
    case blkif::kOpDiscard: {
      const blkif::DiscardRequest& discard = slot.discard;
      if (limits_.read_only) return TakeResult::kInvalid;
      if (discard.nr_sectors == 0 ||
          !RangeInsideDisk(discard.sector_number, discard.nr_sectors)) {
        return TakeResult::kInvalid;
      }
      if (discard.flag & ~(blkif::kDiscardSecure | blkif::kDiscardZeroes)) {
        return TakeResult::kInvalid;
      }
      out->op = (discard.flag & blkif::kDiscardZeroes) ? BlockOp::kWriteZeroes
                                                       : BlockOp::kDiscard;
      out->sector = discard.sector_number;
      out->num_sectors = discard.nr_sectors;
      return TakeResult::kValid;
    }
    default:
      // WRITE_BARRIER, INDIRECT and unknown operations.
      return TakeResult::kUnsupported;
  }
}

TakeResult BlkifDeviceRing::DecodeReadWrite(const blkif::Request& request,
                                            DeviceRequest* out) const {
  bool is_write = request.operation == blkif::kOpWrite;
  if (is_write && limits_.read_only) return TakeResult::kInvalid;
  uint32_t count = request.nr_segments;
  if (count == 0 || count > limits_.max_segments ||
      count > static_cast<uint32_t>(blkif::kMaxDirectSegments)) {
    return TakeResult::kInvalid;
  }
  uint64_t sectors = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const blkif::Segment& seg = request.seg[i];
    if (seg.gref >= limits_.data_pages) return TakeResult::kInvalid;
    if (seg.first_sect > seg.last_sect ||
        seg.last_sect >= blkif::kSectorsPerPage) {
      return TakeResult::kInvalid;
    }
    uint8_t* base = data_ + size_t{seg.gref} * blkif::kPageSize +
                    size_t{seg.first_sect} * blkif::kSectorSize;
    size_t length =
        size_t{seg.last_sect - seg.first_sect + 1u} * blkif::kSectorSize;
    sectors += length / blkif::kSectorSize;
    // Coalesce with the previous segment when the memory continues.
    if (!out->iov.empty()) {
      iovec& last = out->iov.back();
      if (static_cast<uint8_t*>(last.iov_base) + last.iov_len == base) {
        last.iov_len += length;
        continue;
      }
    }
    out->iov.push_back(iovec{base, length});
  }
  if (!RangeInsideDisk(request.sector_number, sectors)) {
    out->iov.clear();
    return TakeResult::kInvalid;
  }
  out->op = is_write ? BlockOp::kWrite : BlockOp::kRead;
  out->sector = request.sector_number;
  out->num_sectors = sectors;
  out->segment_count = count;
  return TakeResult::kValid;
}

void BlkifDeviceRing::PutResponse(const DeviceRequest& request, int result) {
  blkif::Response response;
  std::memset(&response, 0, sizeof(response));
  response.id = request.id;
  response.operation = request.wire_op;
  response.status = result == 0             ? blkif::kRspOkay
                    : result == -EOPNOTSUPP ? blkif::kRspEopnotsupp
                                            : blkif::kRspError;
  std::memcpy(&slots_[rsp_prod_pvt_ & (size_ - 1)].rsp, &response,
              sizeof(response));
  ++rsp_prod_pvt_;
}

PushResult BlkifDeviceRing::PublishResponses() {
  RingIdx old_prod = LoadRelaxed(header_->rsp_prod);
  RingIdx new_prod = rsp_prod_pvt_;
  if (old_prod == new_prod) return PushResult::kNothing;
  StoreRelease(header_->rsp_prod, new_prod);
  FullBarrier();
  RingIdx event = LoadRelaxed(header_->rsp_event);
  return NeedsNotify(old_prod, new_prod, event) ? PushResult::kNotify
                                                : PushResult::kSuppressed;
}

bool BlkifDeviceRing::FinalCheckForRequests() {
  if (Unconsumed(LoadAcquire(header_->req_prod)) > 0) return true;
  StoreRelease(header_->req_event, req_cons_ + 1);
  FullBarrier();
  return Unconsumed(LoadAcquire(header_->req_prod)) > 0;
}

}  // namespace pvdisk::transport

#include "transport/blkif/device_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {

BlkifDeviceRing::BlkifDeviceRing(uint8_t* ring_memory, uint32_t slots,
                                 GrantMapper* grants,
                                 const BlkifDeviceLimits& limits,
                                 NotifyMode notify)
    : header_(reinterpret_cast<blkif::SharedRingHeader*>(ring_memory)),
      slots_(reinterpret_cast<blkif::Slot*>(ring_memory +
                                            sizeof(blkif::SharedRingHeader))),
      size_(slots),
      grants_(grants),
      limits_(limits),
      notify_(notify) {
  indirect_copy_.reserve(blkif::kMaxIndirectSegments);
}

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
                                   DeviceRequest* out) {
  out->id = slot.req.id;
  out->wire_op = slot.req.operation;
  out->indirect = false;
  out->segments.clear();
  switch (slot.req.operation) {
    case blkif::kOpRead:
    case blkif::kOpWrite: {
      bool is_write = slot.req.operation == blkif::kOpWrite;
      if (is_write && limits_.read_only) return TakeResult::kInvalid;
      uint32_t count = slot.req.nr_segments;
      if (count == 0 || count > limits_.max_segments ||
          count > static_cast<uint32_t>(blkif::kMaxDirectSegments)) {
        return TakeResult::kInvalid;
      }
      out->op = is_write ? BlockOp::kWrite : BlockOp::kRead;
      return AddSegments(slot.req.seg, count, slot.req.sector_number, out);
    }
    case blkif::kOpIndirect:
      return DecodeIndirect(slot.indirect, out);
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

TakeResult BlkifDeviceRing::DecodeIndirect(
    const blkif::IndirectRequest& request, DeviceRequest* out) {
  // Indirect requests exist only where the frontend was offered more than
  // the direct maximum.
  if (limits_.max_segments <=
      static_cast<uint32_t>(blkif::kMaxDirectSegments)) {
    return TakeResult::kUnsupported;
  }
  out->wire_op = request.indirect_op;  // blkfront checks the response's op
  bool is_write = request.indirect_op == blkif::kOpWrite;
  if (request.indirect_op != blkif::kOpRead && !is_write) {
    return TakeResult::kInvalid;
  }
  if (is_write && limits_.read_only) return TakeResult::kInvalid;
  uint32_t count = request.nr_segments;
  if (count == 0 || count > limits_.max_segments) return TakeResult::kInvalid;
  uint32_t pages = (count + blkif::kSegmentsPerIndirectPage - 1) /
                   blkif::kSegmentsPerIndirectPage;
  if (pages > static_cast<uint32_t>(blkif::kMaxIndirectPages)) {
    return TakeResult::kInvalid;
  }
  // Copy each indirect page's part of the list once, then look only at the
  // copy.
  indirect_copy_.resize(count);
  for (uint32_t p = 0; p < pages; ++p) {
    uint32_t page = request.indirect_grefs[p];
    if (page >= limits_.data_pages) return TakeResult::kInvalid;
    PageMapping mapping;
    if (!grants_->MapPages(page, 1, &mapping)) return TakeResult::kInvalid;
    uint32_t first = p * blkif::kSegmentsPerIndirectPage;
    uint32_t in_page =
        std::min<uint32_t>(blkif::kSegmentsPerIndirectPage, count - first);
    std::memcpy(&indirect_copy_[first], mapping.address,
                in_page * sizeof(blkif::Segment));
    grants_->UnmapPages(mapping);
  }
  out->op = is_write ? BlockOp::kWrite : BlockOp::kRead;
  out->indirect = true;
  return AddSegments(indirect_copy_.data(), count, request.sector_number, out);
}

TakeResult BlkifDeviceRing::AddSegments(const blkif::Segment* segments,
                                        uint32_t count, uint64_t sector,
                                        DeviceRequest* out) const {
  uint64_t sectors = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const blkif::Segment& seg = segments[i];
    if (seg.gref >= limits_.data_pages) return TakeResult::kInvalid;
    if (seg.first_sect > seg.last_sect ||
        seg.last_sect >= blkif::kSectorsPerPage) {
      return TakeResult::kInvalid;
    }
    sectors += seg.last_sect - seg.first_sect + 1u;
    out->segments.push_back(
        DataSegment{seg.gref, seg.first_sect, seg.last_sect});
  }
  if (!RangeInsideDisk(sector, sectors)) {
    out->segments.clear();
    return TakeResult::kInvalid;
  }
  out->sector = sector;
  out->num_sectors = sectors;
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
  if (notify_ == NotifyMode::kAlways) return PushResult::kNotify;
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

namespace pvdisk::transport {

bool BlkifDeviceRing::HasRequests() {
  return Unconsumed(LoadAcquire(header_->req_prod)) > 0;
}

}  // namespace pvdisk::transport

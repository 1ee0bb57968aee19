#include "transport/blkif/driver_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

uint8_t WireOp(BlockOp op) {
  switch (op) {
    case BlockOp::kRead:
      return blkif::kOpRead;
    case BlockOp::kWrite:
      return blkif::kOpWrite;
    case BlockOp::kFlush:
      return blkif::kOpFlushDiskCache;
    case BlockOp::kDiscard:
    case BlockOp::kWriteZeroes:
      return blkif::kOpDiscard;
  }
  return blkif::kOpRead;
}

int ResultOf(int16_t status) {
  if (status == blkif::kRspOkay) return 0;
  if (status == blkif::kRspEopnotsupp) return -EOPNOTSUPP;
  return -EIO;
}

}  // namespace

BlkifDriverRing::BlkifDriverRing(uint8_t* ring_memory, uint32_t slots,
                                 uint8_t* data_memory, NotifyMode notify)
    : header_(reinterpret_cast<blkif::SharedRingHeader*>(ring_memory)),
      slots_(reinterpret_cast<blkif::Slot*>(ring_memory +
                                            sizeof(blkif::SharedRingHeader))),
      size_(slots),
      data_(data_memory),
      notify_(notify) {
  std::memset(header_, 0, sizeof(*header_));
  header_->req_event = 1;
  header_->rsp_event = 1;
  FullBarrier();
}

uint32_t BlkifDriverRing::FreeSlots() const {
  return size_ - static_cast<RingIdx>(req_prod_pvt_ - rsp_cons_);
}

void BlkifDriverRing::Write(const RingRequest& request) {
  blkif::Slot slot;
  std::memset(&slot, 0, sizeof(slot));
  if (request.op == BlockOp::kDiscard || request.op == BlockOp::kWriteZeroes) {
    slot.discard.operation = blkif::kOpDiscard;
    slot.discard.flag =
        request.op == BlockOp::kWriteZeroes ? blkif::kDiscardZeroes : 0;
    slot.discard.id = request.id;
    slot.discard.sector_number = request.sector;
    slot.discard.nr_sectors = request.num_sectors;
  } else if (request.segment_count > blkif::kMaxDirectSegments) {
    // Indirect: the segment list goes into the request's indirect pages,
    // 512 segments per page; the slot names those pages.
    slot.indirect.operation = blkif::kOpIndirect;
    slot.indirect.indirect_op = WireOp(request.op);
    slot.indirect.nr_segments = static_cast<uint16_t>(request.segment_count);
    slot.indirect.id = request.id;
    slot.indirect.sector_number = request.sector;
    uint32_t pages =
        (request.segment_count + blkif::kSegmentsPerIndirectPage - 1) /
        blkif::kSegmentsPerIndirectPage;
    for (uint32_t p = 0; p < pages; ++p) {
      uint32_t page = request.table_pages[p];
      slot.indirect.indirect_grefs[p] = page;
      auto* list = reinterpret_cast<blkif::Segment*>(
          data_ + size_t{page} * blkif::kPageSize);
      uint32_t first = p * blkif::kSegmentsPerIndirectPage;
      uint32_t count = std::min<uint32_t>(blkif::kSegmentsPerIndirectPage,
                                          request.segment_count - first);
      for (uint32_t i = 0; i < count; ++i) {
        const DataSegment& segment = request.segments[first + i];
        list[i] = blkif::Segment{segment.page, segment.first_sector,
                                 segment.last_sector, 0};
      }
    }
  } else {
    slot.req.operation = WireOp(request.op);
    slot.req.nr_segments = static_cast<uint8_t>(request.segment_count);
    slot.req.id = request.id;
    slot.req.sector_number = request.sector;
    for (uint32_t i = 0; i < request.segment_count; ++i) {
      slot.req.seg[i].gref = request.segments[i].page;
      slot.req.seg[i].first_sect = request.segments[i].first_sector;
      slot.req.seg[i].last_sect = request.segments[i].last_sector;
    }
  }
  std::memcpy(&slots_[req_prod_pvt_ & (size_ - 1)], &slot, sizeof(slot));
  ++req_prod_pvt_;
}

PushResult BlkifDriverRing::Publish() {
  RingIdx old_prod = LoadRelaxed(header_->req_prod);
  RingIdx new_prod = req_prod_pvt_;
  if (old_prod == new_prod) return PushResult::kNothing;
  StoreRelease(header_->req_prod, new_prod);  // slots before the index
  FullBarrier();                              // index before reading event
  if (notify_ == NotifyMode::kAlways) return PushResult::kNotify;
  RingIdx event = LoadRelaxed(header_->req_event);
  return NeedsNotify(old_prod, new_prod, event) ? PushResult::kNotify
                                                : PushResult::kSuppressed;
}

int BlkifDriverRing::ConsumeResponses(
    absl::FunctionRef<void(uint64_t id, int result)> on_response) {
  RingIdx prod = LoadAcquire(header_->rsp_prod);
  if (ResponseProducerOverflow(prod, rsp_cons_, size_)) return -EPROTO;
  int consumed = 0;
  while (rsp_cons_ != prod) {
    blkif::Response response;
    std::memcpy(&response, &slots_[rsp_cons_ & (size_ - 1)].rsp,
                sizeof(response));
    ++rsp_cons_;
    ++consumed;
    on_response(response.id, ResultOf(response.status));
  }
  return consumed;
}

bool BlkifDriverRing::FinalCheckForResponses() {
  if (LoadAcquire(header_->rsp_prod) != rsp_cons_) return true;
  StoreRelease(header_->rsp_event, rsp_cons_ + 1);
  FullBarrier();
  return LoadAcquire(header_->rsp_prod) != rsp_cons_;
}

}  // namespace pvdisk::transport

#include "transport/virtio/blk_chain.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "transport/virtio/format.h"

namespace pvdisk::transport::virtio {
namespace {

uint32_t TypeOf(BlockOp op) {
  switch (op) {
    case BlockOp::kRead:
      return kTypeIn;
    case BlockOp::kWrite:
      return kTypeOut;
    case BlockOp::kFlush:
      return kTypeFlush;
    case BlockOp::kDiscard:
      return kTypeDiscard;
    case BlockOp::kWriteZeroes:
      return kTypeWriteZeroes;
  }
  return kTypeIn;
}

bool IsRange(BlockOp op) {
  return op == BlockOp::kDiscard || op == BlockOp::kWriteZeroes;
}

}  // namespace

uint32_t BlkChainLength(BlockOp op, uint32_t segment_count) {
  return 2 + (IsRange(op) ? 1 : segment_count);
}

uint64_t EncodeBlkRequest(const RingRequest& request, uint8_t* data_memory,
                          std::vector<Buffer>* chain) {
  // Header, status and (for a range) the segment live in the id's first
  // table page.
  uint64_t table = uint64_t{request.table_pages[0]} * kPageSize;
  uint8_t* table_memory = data_memory + table;
  BlkHeader header{TypeOf(request.op), 0,
                   request.op == BlockOp::kFlush ? 0 : request.sector};
  std::memcpy(table_memory + kHeaderOffset, &header, sizeof(header));
  table_memory[kStatusOffset] = 0xff;  // not answered yet

  chain->clear();
  chain->push_back(Buffer{table + kHeaderOffset, sizeof(header), false});
  if (IsRange(request.op)) {
    // The caller split the range at MaxRangeSectors(): it fits num_sectors.
    assert(request.num_sectors > 0 &&
           request.num_sectors <= kMaxDiscardSectors);
    DiscardSegment segment{request.sector,
                           static_cast<uint32_t>(request.num_sectors), 0};
    std::memcpy(table_memory + kDiscardOffset, &segment, sizeof(segment));
    chain->push_back(Buffer{table + kDiscardOffset, sizeof(segment), false});
  }
  const bool data_writable = request.op == BlockOp::kRead;
  for (uint32_t i = 0; i < request.segment_count; ++i) {
    const DataSegment& segment = request.segments[i];
    uint64_t addr = uint64_t{segment.page} * kPageSize +
                    uint64_t{segment.first_sector} * 512;
    uint32_t len = (segment.last_sector - segment.first_sector + 1u) * 512;
    // One buffer per page, as blkif has one segment per page: a guest's
    // pages are not contiguous, and seg_max counts them.
    chain->push_back(Buffer{addr, len, data_writable});
  }
  chain->push_back(Buffer{table + kStatusOffset, 1, true});
  return table + kStatusOffset;
}

int BlkResult(uint8_t status) {
  if (status == kStatusOk) return 0;
  if (status == kStatusUnsupp) return -EOPNOTSUPP;
  return -EIO;
}

}  // namespace pvdisk::transport::virtio

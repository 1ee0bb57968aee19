// SGL descriptors and segments (data_pointer.h).
#include <cstring>

#include "transport/nvme/data_pointer.h"

namespace pvdisk::transport::nvme {
namespace {

SglDescriptor Descriptor(uint64_t addr, uint32_t length, uint8_t id) {
  SglDescriptor d{};
  d.addr = addr;
  d.length = length;
  d.id = id;
  return d;
}

void SetSgl1(const SglDescriptor& d, Command* command) {
  command->flags = (command->flags & ~kFlagsPsdtMask) | kPsdtSgl;
  std::memcpy(command->dptr, &d, sizeof(d));
}

}  // namespace

void EncodeSgl(const DataSegment* segments, uint32_t count,
               const uint32_t* table_pages, uint8_t* data_memory,
               Command* command) {
  // Data blocks: runs of segments that continue each other in memory.
  std::vector<SglDescriptor> blocks;
  blocks.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const DataSegment& s = segments[i];
    const uint64_t addr =
        uint64_t{s.page} * kPageSize + uint64_t{s.first_sector} * kLbaBytes;
    const uint32_t len = (s.last_sector - s.first_sector + 1u) * kLbaBytes;
    if (!blocks.empty() && blocks.back().addr + blocks.back().length == addr) {
      blocks.back().length += len;
      continue;
    }
    blocks.push_back(Descriptor(addr, len, kSglDataBlock));
  }
  const uint32_t n = static_cast<uint32_t>(blocks.size());
  if (n == 1) {
    SetSgl1(blocks[0], command);
    return;
  }
  // Segments of up to kSglPerPage descriptors, one per table page; a
  // segment with more to come ends with a link to the next.
  auto segment_of = [&](uint32_t page, uint32_t from) {
    const uint32_t remaining = n - from;
    const bool last = remaining <= kSglPerPage;
    const uint32_t entries = last ? remaining : kSglPerPage;
    return Descriptor(uint64_t{table_pages[page]} * kPageSize,
                      entries * static_cast<uint32_t>(sizeof(SglDescriptor)),
                      last ? kSglLastSegment : kSglSegment);
  };
  SetSgl1(segment_of(0, 0), command);
  uint32_t next = 0;
  for (uint32_t page = 0; next < n; ++page) {
    auto* table = reinterpret_cast<SglDescriptor*>(
        data_memory + uint64_t{table_pages[page]} * kPageSize);
    const bool last = n - next <= kSglPerPage;
    const uint32_t here = last ? n - next : kSglPerPage - 1;
    std::memcpy(table, blocks.data() + next, here * sizeof(SglDescriptor));
    next += here;
    if (!last) table[kSglPerPage - 1] = segment_of(page + 1, next);
  }
}

uint16_t DataPointerDecoder::DataBlock(const SglDescriptor& d, uint64_t bytes,
                                       uint64_t* total,
                                       std::vector<DataSegment>* out) {
  if (d.length == 0 || d.length % kLbaBytes != 0 || d.length > bytes - *total) {
    return kScSglInvalidDataLength;
  }
  if (d.addr % kLbaBytes != 0) return kScInvalidField;
  *total += d.length;
  return Append(d.addr, d.length, out);
}

uint16_t DataPointerDecoder::DecodeSgl(const Command& command, uint64_t bytes,
                                       std::vector<DataSegment>* out) {
  if (bytes == 0 || bytes > uint64_t{max_segments_} * kPageSize) {
    return kScInvalidField;
  }
  SglDescriptor d;
  std::memcpy(&d, command.dptr, sizeof(d));
  uint64_t total = 0;
  if (d.id == kSglDataBlock) {
    if (uint16_t s = DataBlock(d, bytes, &total, out); s != kScSuccess) {
      return s;
    }
    return total == bytes ? kScSuccess : kScSglInvalidDataLength;
  }
  // Segments: every descriptor read counts against a budget that a valid
  // list (at most max_segments data blocks and their links) never reaches,
  // so that segments chaining into themselves end.
  uint64_t budget = 2 * uint64_t{max_segments_} + 2;
  for (;;) {
    if (d.id != kSglSegment && d.id != kSglLastSegment) {
      return kScSglInvalidType;
    }
    const bool last = d.id == kSglLastSegment;
    if (d.length == 0 || d.length % sizeof(SglDescriptor) != 0 ||
        d.addr % sizeof(SglDescriptor) != 0) {
      return kScSglInvalidSegment;
    }
    const uint32_t count = d.length / sizeof(SglDescriptor);
    if (count > budget) return kScSglInvalidCount;
    budget -= count;
    if (!area_->Inside(d.addr, d.length)) return kScDataTransferError;
    sgl_segment_.resize(count);
    if (!area_->CopyFrom(d.addr, sgl_segment_.data(), d.length)) {
      return kScDataTransferError;
    }
    bool linked = false;
    for (uint32_t i = 0; i < count; ++i) {
      const SglDescriptor& e = sgl_segment_[i];
      if (e.id == kSglDataBlock) {
        if (uint16_t s = DataBlock(e, bytes, &total, out); s != kScSuccess) {
          return s;
        }
      } else if (e.id == kSglSegment || e.id == kSglLastSegment) {
        // A link only as the last descriptor of a segment that is not the
        // last one.
        if (last || i + 1 != count) return kScSglInvalidSegment;
        d = e;
        linked = true;
      } else {
        return kScSglInvalidType;
      }
    }
    if (!linked) {
      if (!last) return kScSglInvalidSegment;  // a Segment must link on
      break;
    }
  }
  return total == bytes ? kScSuccess : kScSglInvalidDataLength;
}

}  // namespace pvdisk::transport::nvme

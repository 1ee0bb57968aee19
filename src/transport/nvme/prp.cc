// PRP entries and lists (data_pointer.h).
#include <algorithm>
#include <cstring>

#include "transport/nvme/data_pointer.h"

namespace pvdisk::transport::nvme {
namespace {

uint64_t AddressOf(const DataSegment& s) {
  return uint64_t{s.page} * kPageSize + uint64_t{s.first_sector} * kLbaBytes;
}

}  // namespace

void EncodePrp(const DataSegment* segments, uint32_t count,
               const uint32_t* table_pages, uint8_t* data_memory,
               Command* command) {
  command->flags = (command->flags & ~kFlagsPsdtMask) | kPsdtPrp;
  command->dptr[0] = AddressOf(segments[0]);
  command->dptr[1] = 0;
  if (count == 2) command->dptr[1] = uint64_t{segments[1].page} * kPageSize;
  if (count <= 2) return;
  // Entries for segments 1 .. count - 1 in list pages, linked when more
  // follow than a page holds.
  uint32_t next = 1;
  for (uint32_t list = 0; next < count; ++list) {
    const uint64_t list_addr = uint64_t{table_pages[list]} * kPageSize;
    if (list == 0) command->dptr[1] = list_addr;
    auto* entries = reinterpret_cast<uint64_t*>(data_memory + list_addr);
    const uint32_t remaining = count - next;
    const uint32_t here = remaining > kPrpPerPage ? kPrpPerPage - 1 : remaining;
    for (uint32_t i = 0; i < here; ++i) {
      entries[i] = uint64_t{segments[next + i].page} * kPageSize;
    }
    next += here;
    if (next < count) {
      entries[kPrpPerPage - 1] = uint64_t{table_pages[list + 1]} * kPageSize;
    }
  }
}

uint16_t DataPointerDecoder::Append(uint64_t addr, uint64_t len,
                                    std::vector<DataSegment>* out) {
  if (!area_->Inside(addr, len)) return kScDataTransferError;
  for (uint64_t at = addr; at < addr + len;) {
    const uint64_t page = at / kPageSize;
    const uint64_t in_page =
        std::min<uint64_t>(addr + len, (page + 1) * kPageSize) - at;
    const uint8_t first = static_cast<uint8_t>((at % kPageSize) / kLbaBytes);
    const uint8_t last = static_cast<uint8_t>(first + in_page / kLbaBytes - 1);
    // MDTS: no more pages than the driver was offered.
    if (out->size() >= max_segments_) return kScInvalidField;
    out->push_back(DataSegment{static_cast<uint32_t>(page), first, last});
    at += in_page;
  }
  return kScSuccess;
}

uint16_t DataPointerDecoder::AppendPage(uint64_t addr, uint64_t len,
                                        std::vector<DataSegment>* out) {
  if (addr % kPageSize != 0) return kScPrpInvalidOffset;
  if (!area_->Inside(addr, len)) return kScDataTransferError;
  if (out->size() >= max_segments_) return kScInvalidField;
  out->push_back(DataSegment{static_cast<uint32_t>(addr / kPageSize), 0,
                             static_cast<uint8_t>(len / kLbaBytes - 1)});
  return kScSuccess;
}

uint16_t DataPointerDecoder::DecodePrp(const Command& command, uint64_t bytes,
                                       std::vector<DataSegment>* out) {
  if (bytes == 0 || bytes > uint64_t{max_segments_} * kPageSize) {
    return kScInvalidField;
  }
  const uint64_t prp1 = command.dptr[0];
  const uint64_t prp2 = command.dptr[1];
  if (prp1 % kLbaBytes != 0) return kScPrpInvalidOffset;
  const uint64_t first =
      std::min<uint64_t>(bytes, kPageSize - prp1 % kPageSize);
  if (uint16_t s = Append(prp1, first, out); s != kScSuccess) return s;
  uint64_t remaining = bytes - first;
  if (remaining == 0) return kScSuccess;
  if (remaining <= kPageSize) {
    if (prp2 % kPageSize != 0) return kScPrpInvalidOffset;
    return Append(prp2, remaining, out);
  }
  // A PRP list: the first pointer may start inside a page; a link (the last
  // entry of a list page, when entries remain) must start a page, and no
  // list page may come twice (a loop).
  if (prp2 % sizeof(uint64_t) != 0) return kScPrpInvalidOffset;
  uint64_t needed = (remaining + kPageSize - 1) / kPageSize;
  uint64_t list = prp2;
  prp_list_pages_.clear();
  for (;;) {
    const uint32_t slots = static_cast<uint32_t>(
        (kPageSize - list % kPageSize) / sizeof(uint64_t));
    const bool links = needed > slots;
    const uint32_t data_entries =
        links ? slots - 1 : static_cast<uint32_t>(needed);
    const uint32_t read = links ? slots : data_entries;
    if (!area_->Inside(list, uint64_t{read} * sizeof(uint64_t))) {
      return kScDataTransferError;
    }
    prp_list_pages_.push_back(static_cast<uint32_t>(list / kPageSize));
    prp_list_.resize(read);
    if (!area_->CopyFrom(list, prp_list_.data(), read * sizeof(uint64_t))) {
      return kScDataTransferError;
    }
    for (uint32_t i = 0; i < data_entries; ++i) {
      const uint64_t len = std::min<uint64_t>(remaining, kPageSize);
      if (uint16_t s = AppendPage(prp_list_[i], len, out); s != kScSuccess) {
        return s;
      }
      remaining -= len;
    }
    needed -= data_entries;
    if (needed == 0) return kScSuccess;
    list = prp_list_[slots - 1];
    if (list % kPageSize != 0) return kScPrpInvalidOffset;
    if (std::find(prp_list_pages_.begin(), prp_list_pages_.end(),
                  list / kPageSize) != prp_list_pages_.end()) {
      return kScInvalidField;
    }
  }
}

}  // namespace pvdisk::transport::nvme

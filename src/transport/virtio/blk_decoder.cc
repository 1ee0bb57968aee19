#include "transport/virtio/blk_decoder.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pvdisk::transport::virtio {
namespace {

constexpr uint64_t kSector = 512;

}  // namespace

BlkDecoder::BlkDecoder(GrantMapper* grants, const DeviceLimits& limits)
    : area_(grants, limits.data_pages), limits_(limits) {}

void BlkDecoder::Reset(uint64_t id, DeviceRequest* out) {
  out->id = id;
  out->wire_op = 0;
  out->indirect = false;
  out->op = BlockOp::kFlush;
  out->sector = 0;
  out->num_sectors = 0;
  out->segments.clear();
  out->reply_offset = kNoStatus;
}

bool BlkDecoder::InsideData(uint64_t addr, uint64_t len) const {
  return area_.Inside(addr, len);
}

bool BlkDecoder::CopyFromData(uint64_t addr, void* to, size_t len) {
  return area_.CopyFrom(addr, to, len);
}

bool BlkDecoder::CopyToData(uint64_t addr, const void* from, size_t len) {
  return area_.CopyTo(addr, from, len);
}

uint64_t BlkDecoder::StatusOffset(const std::vector<Buffer>& chain) const {
  if (chain.empty()) return kNoStatus;
  const Buffer& status = chain.back();
  if (!status.device_writable || status.len < 1 ||
      !InsideData(status.addr, status.len)) {
    return kNoStatus;
  }
  return status.addr + status.len - 1;
}

TakeResult BlkDecoder::Decode(const std::vector<Buffer>& chain,
                              DeviceRequest* out) {
  // The status byte is trusted only in a chain whose shape is sound:
  // device-readable buffers first, then device-writable ones, all inside the
  // data area, and a writable last one.
  if (chain.size() < 2) return TakeResult::kInvalid;
  bool writable_seen = false;
  for (const Buffer& b : chain) {
    if (writable_seen && !b.device_writable) return TakeResult::kInvalid;
    writable_seen |= b.device_writable;
    if (!InsideData(b.addr, b.len)) return TakeResult::kInvalid;
  }
  out->reply_offset = StatusOffset(chain);
  if (out->reply_offset == kNoStatus) return TakeResult::kInvalid;
  const Buffer& header_buffer = chain.front();
  if (header_buffer.device_writable || header_buffer.len != sizeof(BlkHeader)) {
    return TakeResult::kInvalid;
  }
  BlkHeader header;
  if (!CopyFromData(header_buffer.addr, &header, sizeof(header))) {
    return TakeResult::kInvalid;
  }
  out->wire_op = static_cast<uint8_t>(header.type);
  switch (header.type) {
    case kTypeIn:
    case kTypeOut:
      return DecodeData(chain, header, out);
    case kTypeFlush:
      if (chain.size() != 2) return TakeResult::kInvalid;
      out->op = BlockOp::kFlush;
      return TakeResult::kValid;
    case kTypeGetId:
      return AnswerGetId(chain, out);
    case kTypeDiscard:
    case kTypeWriteZeroes:
      return DecodeRange(chain, header, out);
    default:
      return TakeResult::kUnsupported;
  }
}

TakeResult BlkDecoder::DecodeData(const std::vector<Buffer>& chain,
                                  const BlkHeader& header, DeviceRequest* out) {
  bool is_read = header.type == kTypeIn;
  if (!is_read && limits_.read_only) return TakeResult::kInvalid;
  size_t data_count = chain.size() - 2;
  if (data_count == 0 || data_count > limits_.max_segments) {
    return TakeResult::kInvalid;
  }
  uint64_t sectors = 0;
  for (size_t i = 1; i + 1 < chain.size(); ++i) {
    const Buffer& b = chain[i];
    if (b.device_writable != is_read) return TakeResult::kInvalid;
    if (b.len == 0 || b.len % kSector != 0 || b.addr % kSector != 0) {
      out->segments.clear();
      return TakeResult::kInvalid;
    }
    // Split at page boundaries into (page, first sector, last sector).
    for (uint64_t at = b.addr; at < b.addr + b.len;) {
      uint64_t page = at / kPageSize;
      uint64_t in_page =
          std::min<uint64_t>(b.addr + b.len, (page + 1) * kPageSize) - at;
      uint8_t first = static_cast<uint8_t>((at % kPageSize) / kSector);
      uint8_t last = static_cast<uint8_t>(first + in_page / kSector - 1);
      out->segments.push_back(
          DataSegment{static_cast<uint32_t>(page), first, last});
      at += in_page;
    }
    sectors += b.len / kSector;
  }
  // seg_max bounds the pages too, not only the buffers: one buffer may not
  // smuggle in a larger request than the driver was offered.
  if (out->segments.size() > limits_.max_segments) {
    out->segments.clear();
    return TakeResult::kInvalid;
  }
  if (header.sector > limits_.disk_sectors ||
      sectors > limits_.disk_sectors - header.sector) {
    out->segments.clear();
    return TakeResult::kInvalid;
  }
  out->op = is_read ? BlockOp::kRead : BlockOp::kWrite;
  out->sector = header.sector;
  out->num_sectors = sectors;
  return TakeResult::kValid;
}

TakeResult BlkDecoder::DecodeRange(const std::vector<Buffer>& chain,
                                   const BlkHeader& header,
                                   DeviceRequest* out) {
  if (limits_.read_only) return TakeResult::kInvalid;
  if (chain.size() != 3) return TakeResult::kInvalid;
  const Buffer& b = chain[1];
  if (b.device_writable || b.len != sizeof(DiscardSegment)) {
    return TakeResult::kInvalid;
  }
  DiscardSegment segment;
  if (!CopyFromData(b.addr, &segment, sizeof(segment))) {
    return TakeResult::kInvalid;
  }
  if (segment.num_sectors == 0 || segment.sector > limits_.disk_sectors ||
      segment.num_sectors > limits_.disk_sectors - segment.sector) {
    return TakeResult::kInvalid;
  }
  if (header.type == kTypeDiscard) {
    if (segment.flags != 0) return TakeResult::kInvalid;
    out->op = BlockOp::kDiscard;
  } else {
    if (segment.flags & ~kWriteZeroesUnmap) return TakeResult::kInvalid;
    out->op = (segment.flags & kWriteZeroesUnmap) ? BlockOp::kDiscard
                                                  : BlockOp::kWriteZeroes;
  }
  out->sector = segment.sector;
  out->num_sectors = segment.num_sectors;
  return TakeResult::kValid;
}

TakeResult BlkDecoder::AnswerGetId(const std::vector<Buffer>& chain,
                                   DeviceRequest* out) {
  if (chain.size() != 3) return TakeResult::kInvalid;
  const Buffer& b = chain[1];
  if (!b.device_writable || b.len < kIdBytes) return TakeResult::kInvalid;
  char id[kIdBytes] = {};
  std::memcpy(id, limits_.serial.data(),
              std::min<size_t>(limits_.serial.size(), kIdBytes));
  if (!CopyToData(b.addr, id, sizeof(id))) return TakeResult::kInvalid;
  out->op = BlockOp::kRead;
  out->num_sectors = 0;
  return TakeResult::kAnswered;
}

uint32_t BlkDecoder::WriteStatus(const DeviceRequest& request, int result) {
  uint8_t status = result == 0             ? kStatusOk
                   : result == -EOPNOTSUPP ? kStatusUnsupp
                                           : kStatusIoErr;
  bool status_written =
      request.reply_offset != kNoStatus &&
      CopyToData(request.reply_offset, &status, sizeof(status));
  uint64_t data = 0;
  if (result == 0 && request.op == BlockOp::kRead) {
    data = request.wire_op == kTypeGetId ? kIdBytes
                                         : request.num_sectors * kSector;
  }
  return static_cast<uint32_t>(data + (status_written ? 1 : 0));
}

}  // namespace pvdisk::transport::virtio

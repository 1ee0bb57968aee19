#include "transport/virtio/device_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

using virtio::Desc;

constexpr uint64_t kSector = 512;

}  // namespace

VirtioDeviceRing::VirtioDeviceRing(uint8_t* ring_memory, uint32_t size,
                                   GrantMapper* grants,
                                   const DeviceLimits& limits,
                                   NotifyMode notify)
    : q_(ring_memory, size),
      size_(size),
      grants_(grants),
      limits_(limits),
      notify_(notify),
      data_bytes_(uint64_t{limits.data_pages} * virtio::kPageSize) {
  chain_.reserve(size);
  indirect_.reserve(limits.max_segments + 2);
}

bool VirtioDeviceRing::InsideData(uint64_t addr, uint64_t len) const {
  return addr <= data_bytes_ && len <= data_bytes_ - addr;
}

bool VirtioDeviceRing::CopyFromData(uint64_t addr, void* to, size_t len) {
  if (len == 0) return true;
  uint32_t first = static_cast<uint32_t>(addr / virtio::kPageSize);
  uint32_t last = static_cast<uint32_t>((addr + len - 1) / virtio::kPageSize);
  PageMapping mapping;
  if (!grants_->MapPages(first, last - first + 1, &mapping)) return false;
  std::memcpy(to, mapping.address + addr % virtio::kPageSize, len);
  grants_->UnmapPages(mapping);
  return true;
}

bool VirtioDeviceRing::CopyToData(uint64_t addr, const void* from, size_t len) {
  if (len == 0) return true;
  uint32_t first = static_cast<uint32_t>(addr / virtio::kPageSize);
  uint32_t last = static_cast<uint32_t>((addr + len - 1) / virtio::kPageSize);
  PageMapping mapping;
  if (!grants_->MapPages(first, last - first + 1, &mapping)) return false;
  std::memcpy(mapping.address + addr % virtio::kPageSize, from, len);
  grants_->UnmapPages(mapping);
  return true;
}

bool VirtioDeviceRing::CopyIndirectTable(const Desc& pointer) {
  // NEXT together with INDIRECT is forbidden; the table must hold whole
  // descriptors, at least one, no more than a request may need.
  if (pointer.flags & virtio::kDescNext) return false;
  if (pointer.len == 0 || pointer.len % sizeof(Desc) != 0) return false;
  uint32_t count = pointer.len / sizeof(Desc);
  if (count > limits_.max_segments + 2 || count > virtio::kMaxQueueSize) {
    return false;
  }
  if (!InsideData(pointer.addr, pointer.len)) return false;
  indirect_.resize(count);
  if (!CopyFromData(pointer.addr, indirect_.data(), pointer.len)) return false;
  // Walk the private copy from entry 0; each entry at most once.
  uint32_t index = 0;
  for (uint32_t steps = 0;; ++steps) {
    if (index >= count || steps >= count) return false;
    const Desc& d = indirect_[index];
    if (d.flags & virtio::kDescIndirect) return false;  // nested
    chain_.push_back(d);
    if (!(d.flags & virtio::kDescNext)) return true;
    index = d.next;
  }
}

bool VirtioDeviceRing::CopyChain(uint16_t head) {
  chain_.clear();
  used_indirect_ = false;
  const Desc* table = q_.DescTable();
  uint32_t index = head;
  for (uint32_t steps = 0;; ++steps) {
    if (index >= size_ || steps >= size_) return false;  // out of range, loop
    Desc d;
    std::memcpy(&d, &table[index], sizeof(d));  // the one read of this entry
    if (d.flags & virtio::kDescIndirect) {
      // "Zero or more direct descriptors followed by one indirect".
      used_indirect_ = true;
      return CopyIndirectTable(d);
    }
    chain_.push_back(d);
    if (!(d.flags & virtio::kDescNext)) return true;
    index = d.next;
  }
}

TakeResult VirtioDeviceRing::TakeRequest(DeviceRequest* out) {
  uint16_t avail_idx = LoadAcquire(q_.AvailIdx());
  uint16_t pending = static_cast<uint16_t>(avail_idx - last_avail_);
  if (pending > size_) return TakeResult::kRingBroken;
  if (pending == 0) return TakeResult::kNone;
  uint16_t head = LoadRelaxed(q_.AvailRing(last_avail_ & (size_ - 1)));
  ++last_avail_;
  if (notify_ == NotifyMode::kAlways &&
      !(LoadRelaxed(q_.UsedFlags()) & virtio::kUsedNoNotify)) {
    // Busy: kicks would only tell us what we are about to see.
    StoreRelaxed(q_.UsedFlags(), virtio::kUsedNoNotify);
  }
  out->id = head;
  out->wire_op = 0;
  out->indirect = false;
  out->op = BlockOp::kFlush;
  out->sector = 0;
  out->num_sectors = 0;
  out->segments.clear();
  out->reply_offset = kNoStatus;
  return Decode(out);
}

TakeResult VirtioDeviceRing::Decode(DeviceRequest* out) {
  if (!CopyChain(static_cast<uint16_t>(out->id))) return TakeResult::kInvalid;
  if (chain_.size() < 2) return TakeResult::kInvalid;
  // Device-readable descriptors first, then device-writable ones.
  bool writable_seen = false;
  for (const Desc& d : chain_) {
    bool writable = d.flags & virtio::kDescWrite;
    if (writable_seen && !writable) return TakeResult::kInvalid;
    writable_seen |= writable;
    if (!InsideData(d.addr, d.len)) return TakeResult::kInvalid;
  }
  const Desc& status = chain_.back();
  if (!(status.flags & virtio::kDescWrite) || status.len < 1) {
    return TakeResult::kInvalid;
  }
  out->reply_offset = status.addr + status.len - 1;
  const Desc& header_desc = chain_.front();
  if ((header_desc.flags & virtio::kDescWrite) ||
      header_desc.len != sizeof(virtio::BlkHeader)) {
    return TakeResult::kInvalid;
  }
  virtio::BlkHeader header;
  if (!CopyFromData(header_desc.addr, &header, sizeof(header))) {
    return TakeResult::kInvalid;
  }
  out->wire_op = static_cast<uint8_t>(header.type);
  out->indirect = used_indirect_;
  switch (header.type) {
    case virtio::kTypeIn:
    case virtio::kTypeOut:
      return DecodeData(header, out);
    case virtio::kTypeFlush:
      if (chain_.size() != 2) return TakeResult::kInvalid;
      out->op = BlockOp::kFlush;
      return TakeResult::kValid;
    case virtio::kTypeGetId:
      return AnswerGetId(out);
    case virtio::kTypeDiscard:
    case virtio::kTypeWriteZeroes:
      return DecodeDiscard(header, out);
    default:
      return TakeResult::kUnsupported;
  }
}

TakeResult VirtioDeviceRing::DecodeData(const virtio::BlkHeader& header,
                                        DeviceRequest* out) {
  bool is_read = header.type == virtio::kTypeIn;
  if (!is_read && limits_.read_only) return TakeResult::kInvalid;
  size_t data_count = chain_.size() - 2;
  if (data_count == 0 || data_count > limits_.max_segments) {
    return TakeResult::kInvalid;
  }
  uint64_t sectors = 0;
  for (size_t i = 1; i + 1 < chain_.size(); ++i) {
    const Desc& d = chain_[i];
    bool writable = d.flags & virtio::kDescWrite;
    if (writable != is_read) return TakeResult::kInvalid;
    if (d.len == 0 || d.len % kSector != 0 || d.addr % kSector != 0) {
      return TakeResult::kInvalid;
    }
    // Split at page boundaries into (page, first sector, last sector).
    for (uint64_t at = d.addr; at < d.addr + d.len;) {
      uint64_t page = at / virtio::kPageSize;
      uint64_t in_page =
          std::min<uint64_t>(d.addr + d.len, (page + 1) * virtio::kPageSize) -
          at;
      uint8_t first = static_cast<uint8_t>((at % virtio::kPageSize) / kSector);
      uint8_t last = static_cast<uint8_t>(first + in_page / kSector - 1);
      out->segments.push_back(
          DataSegment{static_cast<uint32_t>(page), first, last});
      at += in_page;
    }
    sectors += d.len / kSector;
  }
  // seg_max bounds the pages too, not only the descriptors: one descriptor
  // may not smuggle in a larger request than the driver was offered.
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

TakeResult VirtioDeviceRing::DecodeDiscard(const virtio::BlkHeader& header,
                                           DeviceRequest* out) {
  if (limits_.read_only) return TakeResult::kInvalid;
  if (chain_.size() != 3) return TakeResult::kInvalid;
  const Desc& d = chain_[1];
  if ((d.flags & virtio::kDescWrite) ||
      d.len != sizeof(virtio::DiscardSegment)) {
    return TakeResult::kInvalid;
  }
  virtio::DiscardSegment segment;
  if (!CopyFromData(d.addr, &segment, sizeof(segment))) {
    return TakeResult::kInvalid;
  }
  if (segment.num_sectors == 0 || segment.sector > limits_.disk_sectors ||
      segment.num_sectors > limits_.disk_sectors - segment.sector) {
    return TakeResult::kInvalid;
  }
  if (header.type == virtio::kTypeDiscard) {
    if (segment.flags != 0) return TakeResult::kInvalid;
    out->op = BlockOp::kDiscard;
  } else {
    if (segment.flags & ~virtio::kWriteZeroesUnmap) return TakeResult::kInvalid;
    out->op = (segment.flags & virtio::kWriteZeroesUnmap)
                  ? BlockOp::kDiscard
                  : BlockOp::kWriteZeroes;
  }
  out->sector = segment.sector;
  out->num_sectors = segment.num_sectors;
  return TakeResult::kValid;
}

TakeResult VirtioDeviceRing::AnswerGetId(DeviceRequest* out) {
  if (chain_.size() != 3) return TakeResult::kInvalid;
  const Desc& d = chain_[1];
  if (!(d.flags & virtio::kDescWrite) || d.len < virtio::kIdBytes) {
    return TakeResult::kInvalid;
  }
  char id[virtio::kIdBytes] = {};
  std::memcpy(id, limits_.serial.data(),
              std::min<size_t>(limits_.serial.size(), virtio::kIdBytes));
  if (!CopyToData(d.addr, id, sizeof(id))) return TakeResult::kInvalid;
  out->op = BlockOp::kRead;  // so that the used length counts the id bytes
  out->num_sectors = 0;
  PutResponse(*out, 0);
  // The used length: the id bytes and the status byte.
  q_.UsedRing(static_cast<uint16_t>(used_shadow_ - 1) & (size_ - 1)).len =
      virtio::kIdBytes + 1;
  return TakeResult::kAnswered;
}

void VirtioDeviceRing::PutResponse(const DeviceRequest& request, int result) {
  uint8_t status = result == 0             ? virtio::kStatusOk
                   : result == -EOPNOTSUPP ? virtio::kStatusUnsupp
                                           : virtio::kStatusIoErr;
  bool status_written =
      request.reply_offset != kNoStatus &&
      CopyToData(request.reply_offset, &status, sizeof(status));
  virtio::UsedElem elem;
  elem.id = static_cast<uint32_t>(request.id);
  // Bytes written into the chain: the data of a successful read, and the
  // status byte.
  uint64_t data = result == 0 && request.op == BlockOp::kRead
                      ? request.num_sectors * kSector
                      : 0;
  elem.len = static_cast<uint32_t>(data + (status_written ? 1 : 0));
  std::memcpy(&q_.UsedRing(used_shadow_ & (size_ - 1)), &elem, sizeof(elem));
  ++used_shadow_;
}

PushResult VirtioDeviceRing::PublishResponses() {
  uint16_t old_idx = used_published_;
  uint16_t new_idx = used_shadow_;
  if (old_idx == new_idx) return PushResult::kNothing;
  StoreRelease(q_.UsedIdx(), new_idx);
  FullBarrier();
  used_published_ = new_idx;
  bool notify =
      notify_ == NotifyMode::kEventIdx
          ? virtio::NeedEvent(LoadRelaxed(q_.UsedEvent()), new_idx, old_idx)
          : !(LoadRelaxed(q_.AvailFlags()) & virtio::kAvailNoInterrupt);
  return notify ? PushResult::kNotify : PushResult::kSuppressed;
}

bool VirtioDeviceRing::HasRequests() {
  return LoadAcquire(q_.AvailIdx()) != last_avail_;
}

bool VirtioDeviceRing::FinalCheckForRequests() {
  if (HasRequests()) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    StoreRelease(q_.AvailEvent(), last_avail_);
  } else {
    StoreRelease(q_.UsedFlags(), uint16_t{0});
  }
  FullBarrier();
  return HasRequests();
}

}  // namespace pvdisk::transport

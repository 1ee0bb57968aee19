#include "transport/virtio/device_ring.h"

#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

using virtio::Buffer;
using virtio::Desc;

Buffer BufferOf(const Desc& d) {
  return Buffer{d.addr, d.len, (d.flags & virtio::kDescWrite) != 0};
}

}  // namespace

VirtioDeviceRing::VirtioDeviceRing(uint8_t* ring_memory, uint32_t size,
                                   GrantMapper* grants,
                                   const DeviceLimits& limits,
                                   NotifyMode notify)
    : q_(ring_memory, size),
      size_(size),
      decoder_(grants, limits),
      notify_(notify) {
  chain_.reserve(size);
  indirect_.reserve(limits.max_segments + 2);
}

bool VirtioDeviceRing::CopyIndirectTable(const Desc& pointer) {
  // NEXT together with INDIRECT is forbidden; the table must hold whole
  // descriptors, at least one, no more than a request may need.
  if (pointer.flags & virtio::kDescNext) return false;
  if (pointer.len == 0 || pointer.len % sizeof(Desc) != 0) return false;
  uint32_t count = pointer.len / sizeof(Desc);
  if (count > decoder_.limits().max_segments + 2 ||
      count > virtio::kMaxQueueSize) {
    return false;
  }
  if (!decoder_.InsideData(pointer.addr, pointer.len)) return false;
  indirect_.resize(count);
  if (!decoder_.CopyFromData(pointer.addr, indirect_.data(), pointer.len)) {
    return false;
  }
  // Walk the private copy from entry 0; each entry at most once.
  uint32_t index = 0;
  for (uint32_t steps = 0;; ++steps) {
    if (index >= count || steps >= count) return false;
    const Desc& d = indirect_[index];
    if (d.flags & virtio::kDescIndirect) return false;  // nested
    chain_.push_back(BufferOf(d));
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
    chain_.push_back(BufferOf(d));
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
  virtio::BlkDecoder::Reset(head, out);
  if (!CopyChain(head)) return TakeResult::kInvalid;
  TakeResult result = decoder_.Decode(chain_, out);
  out->indirect = used_indirect_;
  if (result == TakeResult::kAnswered) PutResponse(*out, 0);
  return result;
}

void VirtioDeviceRing::PutResponse(const DeviceRequest& request, int result) {
  virtio::UsedElem elem;
  elem.id = static_cast<uint32_t>(request.id);
  elem.len = decoder_.WriteStatus(request, result);
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

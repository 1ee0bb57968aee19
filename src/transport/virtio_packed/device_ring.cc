#include "transport/virtio_packed/device_ring.h"

#include <cerrno>

#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

namespace vp = virtio_packed;

// DeviceRequest::id: buffer id, entries consumed, whether it holds the id.
constexpr uint64_t kHoldsBufferId = uint64_t{1} << 32;

uint64_t RequestIdOf(uint16_t buffer_id, uint32_t entries, bool holds) {
  return buffer_id | (uint64_t{entries} << 16) | (holds ? kHoldsBufferId : 0);
}

}  // namespace

PackedDeviceRing::PackedDeviceRing(uint8_t* ring_memory, uint32_t size,
                                   GrantMapper* grants,
                                   const DeviceLimits& limits,
                                   NotifyMode notify)
    : q_(ring_memory, size),
      size_(size),
      decoder_(grants, limits),
      notify_(notify),
      buffer_in_flight_(size, false) {
  pending_used_.reserve(size);
  chain_.reserve(size);
  indirect_.reserve(limits.max_segments + 2);
}

PackedDeviceRing::Head PackedDeviceRing::LookAtHead() {
  // While the device owns every entry, none can be available (a driver that
  // says otherwise is ignored until an answer frees one).
  if (avail_count_ - used_count_ >= size_) return Head::kNone;
  const bool wrap = vp::WrapOf(avail_count_, size_);
  const uint16_t owner =
      q_.LoadFlags(vp::EntryOf(avail_count_, size_)) & vp::kOwnerBits;
  if (owner == vp::AvailBits(wrap)) return Head::kAvailable;
  // AVAIL says "this lap", USED says "already used in it": the device has
  // used nothing at or after its position in this lap.
  if (owner == vp::UsedBits(wrap)) return Head::kInconsistent;
  return Head::kNone;
}

bool PackedDeviceRing::HasRequests() { return LookAtHead() != Head::kNone; }

bool PackedDeviceRing::CopyIndirectTable(const vp::Desc& pointer) {
  if (pointer.flags & vp::kDescNext) return false;
  if (pointer.len == 0 || pointer.len % sizeof(vp::Desc) != 0) return false;
  uint32_t count = pointer.len / sizeof(vp::Desc);
  if (count > decoder_.limits().max_segments + 2 || count > vp::kMaxQueueSize) {
    return false;
  }
  if (!decoder_.InsideData(pointer.addr, pointer.len)) return false;
  indirect_.resize(count);
  if (!decoder_.CopyFromData(pointer.addr, indirect_.data(), pointer.len)) {
    return false;
  }
  // Entries in order; only WRITE counts (NEXT and the id are ignored).
  for (const vp::Desc& d : indirect_) {
    if (d.flags & vp::kDescIndirect) return false;  // nested
    chain_.push_back(
        virtio::Buffer{d.addr, d.len, (d.flags & vp::kDescWrite) != 0});
  }
  return true;
}

bool PackedDeviceRing::CopyChain(uint32_t* entries, uint16_t* buffer_id) {
  chain_.clear();
  used_indirect_ = false;
  *entries = 0;
  for (uint32_t position = avail_count_;; ++position) {
    if (position != avail_count_) {
      // An entry the device still owns: handed over twice.
      if (position - used_count_ >= size_) return false;
      const uint16_t owner =
          q_.LoadFlags(vp::EntryOf(position, size_)) & vp::kOwnerBits;
      // Not available in its own lap: past the ring's end without wrapping,
      // or never written.
      if (owner != vp::AvailBits(vp::WrapOf(position, size_))) return false;
    }
    const vp::Desc d = q_.Copy(vp::EntryOf(position, size_));
    ++*entries;
    *buffer_id = d.id;
    if (d.flags & vp::kDescIndirect) {
      // An indirect entry must be a chain of its own.
      if (position != avail_count_) return false;
      used_indirect_ = true;
      return CopyIndirectTable(d);
    }
    chain_.push_back(
        virtio::Buffer{d.addr, d.len, (d.flags & vp::kDescWrite) != 0});
    if (!(d.flags & vp::kDescNext)) return true;
  }
}

TakeResult PackedDeviceRing::TakeRequest(DeviceRequest* out) {
  const Head head = LookAtHead();
  if (head == Head::kNone) return TakeResult::kNone;
  if (notify_ == NotifyMode::kAlways && !kicks_disabled_) {
    // Busy: kicks would only tell us what we are about to see.
    SetKicks({0, vp::kEventDisable});
  }
  uint32_t entries = 1;
  uint16_t buffer_id = 0;
  bool chain_ok = false;
  if (head == Head::kInconsistent) {
    buffer_id = q_.Copy(vp::EntryOf(avail_count_, size_)).id;
  } else {
    chain_ok = CopyChain(&entries, &buffer_id);
  }
  avail_count_ += entries;
  const bool holds = buffer_id < size_ && !buffer_in_flight_[buffer_id];
  if (holds) buffer_in_flight_[buffer_id] = true;
  virtio::BlkDecoder::Reset(RequestIdOf(buffer_id, entries, holds), out);
  if (!chain_ok) return TakeResult::kInvalid;
  TakeResult result = decoder_.Decode(chain_, out);
  out->indirect = used_indirect_;
  // A bad buffer id fails the request, whose status byte is still trusted
  // if its shape is sound.
  if (!holds) return TakeResult::kInvalid;
  if (result == TakeResult::kAnswered) PutResponse(*out, 0);
  return result;
}

void PackedDeviceRing::PutResponse(const DeviceRequest& request, int result) {
  const uint16_t buffer_id = static_cast<uint16_t>(request.id);
  const uint32_t entries = static_cast<uint32_t>(request.id >> 16) & 0xffff;
  const uint32_t entry = vp::EntryOf(used_count_, size_);
  vp::Desc& used = q_.At(entry);
  used.len = decoder_.WriteStatus(request, result);
  used.id = buffer_id;
  pending_used_.emplace_back(entry,
                             vp::UsedBits(vp::WrapOf(used_count_, size_)));
  used_count_ += entries;
  if (request.id & kHoldsBufferId) buffer_in_flight_[buffer_id] = false;
}

PushResult PackedDeviceRing::PublishResponses() {
  if (pending_used_.empty()) return PushResult::kNothing;
  for (const auto& [entry, flags] : pending_used_) q_.StoreFlags(entry, flags);
  pending_used_.clear();
  FullBarrier();  // entries handed over before reading the suppression
  const uint32_t old_count = used_published_;
  used_published_ = used_count_;
  bool notify =
      vp::ShouldNotify(q_.LoadDriverEvent(), notify_ == NotifyMode::kEventIdx,
                       old_count, used_count_, size_);
  return notify ? PushResult::kNotify : PushResult::kSuppressed;
}

void PackedDeviceRing::SetKicks(vp::EventSuppress event) {
  q_.StoreDeviceEvent(event);
  kicks_disabled_ = event.flags == vp::kEventDisable;
}

bool PackedDeviceRing::FinalCheckForRequests() {
  if (HasRequests()) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    SetKicks({vp::OffWrapOf(avail_count_, size_), vp::kEventDesc});
  } else {
    SetKicks({0, vp::kEventEnable});
  }
  FullBarrier();
  return HasRequests();
}

}  // namespace pvdisk::transport

#include "transport/virtio_packed/driver_ring.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {

namespace vp = virtio_packed;

PackedDriverRing::PackedDriverRing(uint8_t* ring_memory, uint32_t size,
                                   uint8_t* data_memory, NotifyMode notify)
    : q_(ring_memory, size),
      size_(size),
      data_(data_memory),
      notify_(notify),
      num_free_(size),
      request_of_(size, kNoRequest),
      descriptors_of_(size, 0),
      status_offset_(size, 0) {
  // Zero: no entry available or used in lap 0 (wrap counter 1). The event
  // suppressions start as the split queue's zeroed event indices do: with
  // the event-index feature, "notify at position 0" (once, until the peer
  // names another); without it, ENABLE.
  std::memset(ring_memory, 0, q_.layout().bytes);
  if (notify == NotifyMode::kEventIdx) {
    const vp::EventSuppress first{vp::OffWrapOf(0, size), vp::kEventDesc};
    q_.StoreDriverEvent(first);
    q_.StoreDeviceEvent(first);
  }
  free_buffer_ids_.reserve(size);
  for (uint32_t id = size; id-- > 0;) {
    free_buffer_ids_.push_back(static_cast<uint16_t>(id));
  }
  pending_heads_.reserve(size);
  chain_.reserve(64);
  FullBarrier();
}

uint32_t PackedDriverRing::DescriptorsFor(BlockOp op,
                                          uint32_t segment_count) const {
  uint32_t chain = virtio::BlkChainLength(op, segment_count);
  return chain <= kMaxDirectDescriptors ? chain : 1;
}

bool PackedDriverRing::HasRoomFor(BlockOp op, uint32_t segment_count) const {
  // Every chain takes at least one entry, so a buffer id is free whenever
  // an entry is.
  return num_free_ >= DescriptorsFor(op, segment_count);
}

void PackedDriverRing::Write(const RingRequest& request) {
  const uint64_t status_offset =
      virtio::EncodeBlkRequest(request, data_, &chain_);
  const uint32_t count = static_cast<uint32_t>(chain_.size());
  const uint32_t entries = count <= kMaxDirectDescriptors ? count : 1;
  assert(entries == DescriptorsFor(request.op, request.segment_count));
  assert(entries <= num_free_ && !free_buffer_ids_.empty());
  const uint16_t buffer_id = free_buffer_ids_.back();
  free_buffer_ids_.pop_back();

  const uint32_t head = vp::EntryOf(avail_count_, size_);
  uint16_t head_flags = 0;
  if (entries == count) {
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t position = avail_count_ + i;
      const virtio::Buffer& b = chain_[i];
      uint16_t flags = vp::AvailBits(vp::WrapOf(position, size_));
      if (b.device_writable) flags |= vp::kDescWrite;
      if (i + 1 < count) flags |= vp::kDescNext;
      vp::Desc& d = q_.At(vp::EntryOf(position, size_));
      d.addr = b.addr;
      d.len = b.len;
      d.id = buffer_id;
      if (i == 0) {
        head_flags = flags;  // handed over by Publish()
      } else {
        d.flags = flags;  // not looked at before the head is available
      }
    }
  } else {
    // Indirect: the chain goes into the id's table, entries 0..count-1,
    // in order (a packed indirect table has no links).
    uint64_t table = uint64_t{request.table_pages[0]} * vp::kPageSize +
                     virtio::kIndirectTableOffset;
    auto* indirect = reinterpret_cast<vp::Desc*>(data_ + table);
    for (uint32_t i = 0; i < count; ++i) {
      const virtio::Buffer& b = chain_[i];
      indirect[i] = vp::Desc{b.addr, b.len, 0,
                             b.device_writable ? vp::kDescWrite : uint16_t{0}};
    }
    vp::Desc& d = q_.At(head);
    d.addr = table;
    d.len = static_cast<uint32_t>(count * sizeof(vp::Desc));
    d.id = buffer_id;
    head_flags =
        vp::kDescIndirect | vp::AvailBits(vp::WrapOf(avail_count_, size_));
  }
  pending_heads_.emplace_back(head, head_flags);
  request_of_[buffer_id] = static_cast<uint32_t>(request.id);
  descriptors_of_[buffer_id] = entries;
  status_offset_[buffer_id] = status_offset;
  avail_count_ += entries;
  num_free_ -= entries;
}

PushResult PackedDriverRing::Publish() {
  if (pending_heads_.empty()) return PushResult::kNothing;
  for (const auto& [entry, flags] : pending_heads_) q_.StoreFlags(entry, flags);
  pending_heads_.clear();
  FullBarrier();  // entries handed over before reading the suppression
  const uint32_t old_count = published_count_;
  published_count_ = avail_count_;
  bool notify =
      vp::ShouldNotify(q_.LoadDeviceEvent(), notify_ == NotifyMode::kEventIdx,
                       old_count, avail_count_, size_);
  return notify ? PushResult::kNotify : PushResult::kSuppressed;
}

bool PackedDriverRing::UsedWaiting() {
  uint16_t flags = q_.LoadFlags(vp::EntryOf(used_count_, size_));
  return (flags & vp::kOwnerBits) ==
         vp::UsedBits(vp::WrapOf(used_count_, size_));
}

void PackedDriverRing::SetInterrupts(vp::EventSuppress event) {
  q_.StoreDriverEvent(event);
  interrupts_disabled_ = event.flags == vp::kEventDisable;
}

int PackedDriverRing::ConsumeResponses(
    absl::FunctionRef<void(uint64_t id, int result)> on_response) {
  if (notify_ == NotifyMode::kAlways && !interrupts_disabled_) {
    // Busy consuming: interrupts would only wake us for what we see anyway.
    SetInterrupts({0, vp::kEventDisable});
  }
  int consumed = 0;
  while (UsedWaiting()) {
    vp::Desc used = q_.Copy(vp::EntryOf(used_count_, size_));
    // The device is a stranger too: a buffer id not in flight leaves no way
    // to know how far to skip.
    if (used.id >= size_ || request_of_[used.id] == kNoRequest) {
      return consumed > 0 ? consumed : -EPROTO;
    }
    const uint16_t buffer_id = used.id;
    const uint32_t request = request_of_[buffer_id];
    const uint8_t status = data_[status_offset_[buffer_id]];
    request_of_[buffer_id] = kNoRequest;
    free_buffer_ids_.push_back(buffer_id);
    used_count_ += descriptors_of_[buffer_id];
    num_free_ += descriptors_of_[buffer_id];
    ++consumed;
    on_response(request, virtio::BlkResult(status));
  }
  return consumed;
}

bool PackedDriverRing::FinalCheckForResponses() {
  if (UsedWaiting()) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    SetInterrupts({vp::OffWrapOf(used_count_, size_), vp::kEventDesc});
  } else {
    SetInterrupts({0, vp::kEventEnable});
  }
  FullBarrier();
  return UsedWaiting();
}

}  // namespace pvdisk::transport

#include "transport/virtio/driver_ring.h"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

using virtio::Desc;

Desc DescOf(const virtio::Buffer& b) {
  return Desc{b.addr, b.len,
              b.device_writable ? virtio::kDescWrite : uint16_t{0}, 0};
}

}  // namespace

VirtioDriverRing::VirtioDriverRing(uint8_t* ring_memory, uint32_t size,
                                   uint8_t* data_memory, NotifyMode notify)
    : q_(ring_memory, size),
      size_(size),
      data_(data_memory),
      notify_(notify),
      desc_(q_.DescTable()),
      num_free_(size),
      id_of_head_(size, kNoId),
      chain_length_(size, 0),
      status_offset_(size, 0) {
  std::memset(ring_memory, 0, q_.layout().bytes);
  // All descriptors on the free list. The links are kept privately in
  // next_, so that nothing the device writes can corrupt the free list.
  next_.resize(size);
  for (uint32_t i = 0; i < size; ++i) {
    next_[i] = static_cast<uint16_t>(i + 1 < size ? i + 1 : 0);
  }
  chain_.reserve(64);
  FullBarrier();
}

uint32_t VirtioDriverRing::DescriptorsFor(BlockOp op,
                                          uint32_t segment_count) const {
  uint32_t chain = virtio::BlkChainLength(op, segment_count);
  return chain <= kMaxDirectDescriptors ? chain : 1;
}

bool VirtioDriverRing::HasRoomFor(BlockOp op, uint32_t segment_count) const {
  return num_free_ >= DescriptorsFor(op, segment_count);
}

uint16_t VirtioDriverRing::TakeDescriptor() {
  uint16_t index = free_head_;
  free_head_ = next_[index];
  --num_free_;
  return index;
}

void VirtioDriverRing::FreeChain(uint16_t head) {
  // Walk the chain as we built it, from our private links.
  uint16_t index = head;
  for (uint16_t i = 1; i < chain_length_[head]; ++i) index = next_[index];
  next_[index] = free_head_;
  free_head_ = head;
  num_free_ += chain_length_[head];
}

void VirtioDriverRing::Write(const RingRequest& request) {
  const uint64_t status_offset =
      virtio::EncodeBlkRequest(request, data_, &chain_);
  uint64_t table = uint64_t{request.table_pages[0]} * virtio::kPageSize;
  uint8_t* table_memory = data_ + table;

  uint16_t head;
  const uint32_t count = static_cast<uint32_t>(chain_.size());
  // The room check promised exactly this many descriptors.
  assert(DescriptorsFor(request.op, request.segment_count) ==
         (count <= kMaxDirectDescriptors ? count : 1));
  if (count <= kMaxDirectDescriptors) {
    head = TakeDescriptor();
    uint16_t index = head;
    for (uint32_t i = 0; i < count; ++i) {
      Desc d = DescOf(chain_[i]);
      if (i + 1 < count) {
        uint16_t following = TakeDescriptor();
        d.flags |= virtio::kDescNext;
        d.next = following;
        next_[index] = following;
        desc_[index] = d;
        index = following;
      } else {
        desc_[index] = d;
      }
    }
    chain_length_[head] = static_cast<uint16_t>(count);
  } else {
    // Indirect: the chain goes into the id's table, entries 0..count-1.
    auto* indirect =
        reinterpret_cast<Desc*>(table_memory + virtio::kIndirectTableOffset);
    for (uint32_t i = 0; i < count; ++i) {
      Desc d = DescOf(chain_[i]);
      if (i + 1 < count) {
        d.flags |= virtio::kDescNext;
        d.next = static_cast<uint16_t>(i + 1);
      }
      indirect[i] = d;
    }
    head = TakeDescriptor();
    desc_[head] = Desc{table + virtio::kIndirectTableOffset,
                       static_cast<uint32_t>(count * sizeof(Desc)),
                       virtio::kDescIndirect, 0};
    chain_length_[head] = 1;
  }
  id_of_head_[head] = static_cast<uint32_t>(request.id);
  status_offset_[head] = status_offset;
  q_.AvailRing(avail_shadow_ & (size_ - 1)) = head;
  ++avail_shadow_;
}

PushResult VirtioDriverRing::Publish() {
  uint16_t old_idx = avail_published_;
  uint16_t new_idx = avail_shadow_;
  if (old_idx == new_idx) return PushResult::kNothing;
  StoreRelease(q_.AvailIdx(), new_idx);  // ring entries before the index
  FullBarrier();                         // index before reading suppression
  avail_published_ = new_idx;
  bool notify =
      notify_ == NotifyMode::kEventIdx
          ? virtio::NeedEvent(LoadRelaxed(q_.AvailEvent()), new_idx, old_idx)
          : !(LoadRelaxed(q_.UsedFlags()) & virtio::kUsedNoNotify);
  return notify ? PushResult::kNotify : PushResult::kSuppressed;
}

int VirtioDriverRing::ConsumeResponses(
    absl::FunctionRef<void(uint64_t id, int result)> on_response) {
  if (notify_ == NotifyMode::kAlways) {
    // Busy consuming: interrupts would only wake us for what we see anyway.
    StoreRelaxed(q_.AvailFlags(), virtio::kAvailNoInterrupt);
  }
  uint16_t used_idx = LoadAcquire(q_.UsedIdx());
  if (static_cast<uint16_t>(used_idx - last_used_) > size_) return -EPROTO;
  int consumed = 0;
  while (last_used_ != used_idx) {
    virtio::UsedElem elem;
    std::memcpy(&elem, &q_.UsedRing(last_used_ & (size_ - 1)), sizeof(elem));
    ++last_used_;
    ++consumed;
    // The device is a stranger too: ignore heads we did not hand out.
    if (elem.id >= size_ || id_of_head_[elem.id] == kNoId) continue;
    uint16_t head = static_cast<uint16_t>(elem.id);
    uint32_t id = id_of_head_[head];
    uint8_t status = data_[status_offset_[head]];
    id_of_head_[head] = kNoId;
    FreeChain(head);
    on_response(id, virtio::BlkResult(status));
  }
  return consumed;
}

bool VirtioDriverRing::FinalCheckForResponses() {
  if (LoadAcquire(q_.UsedIdx()) != last_used_) return true;
  if (notify_ == NotifyMode::kEventIdx) {
    StoreRelease(q_.UsedEvent(), last_used_);
  } else {
    StoreRelease(q_.AvailFlags(), uint16_t{0});
  }
  FullBarrier();
  return LoadAcquire(q_.UsedIdx()) != last_used_;
}

}  // namespace pvdisk::transport

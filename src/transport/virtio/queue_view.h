// QueueView: the parts of a split virtqueue's shared memory, at the offsets
// virtio::LayoutFor() gives. Both sides use it; it only names memory and
// decides nothing (the rules live in driver_ring.* and device_ring.*).
#pragma once

#include <cstdint>

#include "transport/virtio/format.h"

namespace pvdisk::transport::virtio {

class QueueView {
 public:
  // `ring_memory` holds LayoutFor(size).bytes bytes and outlives the view.
  QueueView(uint8_t* ring_memory, uint32_t size)
      : ring_(ring_memory), size_(size), layout_(LayoutFor(size)) {}

  Desc* DescTable() { return reinterpret_cast<Desc*>(ring_ + layout_.desc); }
  uint16_t& AvailFlags() { return At<uint16_t>(layout_.avail); }
  uint16_t& AvailIdx() { return At<uint16_t>(layout_.avail + 2); }
  uint16_t& AvailRing(uint32_t i) {
    return At<uint16_t>(layout_.avail + 4 + 2 * size_t{i});
  }
  // With EVENT_IDX: the driver's "interrupt me after this used index".
  uint16_t& UsedEvent() { return AvailRing(size_); }
  uint16_t& UsedFlags() { return At<uint16_t>(layout_.used); }
  uint16_t& UsedIdx() { return At<uint16_t>(layout_.used + 2); }
  UsedElem& UsedRing(uint32_t i) {
    return At<UsedElem>(layout_.used + 4 + 8 * size_t{i});
  }
  // With EVENT_IDX: the device's "kick me after this available index".
  uint16_t& AvailEvent() {
    return At<uint16_t>(layout_.used + 4 + 8 * size_t{size_});
  }

  const RingLayout& layout() const { return layout_; }
  uint32_t size() const { return size_; }

 private:
  template <typename T>
  T& At(size_t offset) {
    return *reinterpret_cast<T*>(ring_ + offset);
  }

  uint8_t* ring_;
  uint32_t size_;
  RingLayout layout_;
};

}  // namespace pvdisk::transport::virtio

// RingView: the parts of a packed virtqueue's shared memory, at the offsets
// LayoutFor() gives, with the atomic accesses both sides need. It only names
// memory and decides nothing (the rules live in driver_ring.* and
// device_ring.*).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "transport/virtio_packed/format.h"

namespace pvdisk::transport::virtio_packed {

class RingView {
 public:
  // `ring_memory` holds LayoutFor(size).bytes bytes and outlives the view.
  RingView(uint8_t* ring_memory, uint32_t size)
      : ring_(ring_memory), size_(size), layout_(LayoutFor(size)) {}

  Desc* Descs() { return reinterpret_cast<Desc*>(ring_ + layout_.desc); }
  Desc& At(uint32_t entry) { return Descs()[entry]; }

  // An entry's flags: acquire when reading whether the peer handed it over
  // (the rest of the entry is read after), release when handing it over
  // (the rest of the entry was written before).
  uint16_t LoadFlags(uint32_t entry) {
    return std::atomic_ref<uint16_t>(At(entry).flags)
        .load(std::memory_order_acquire);
  }
  void StoreFlags(uint32_t entry, uint16_t flags) {
    std::atomic_ref<uint16_t>(At(entry).flags)
        .store(flags, std::memory_order_release);
  }
  // A private copy of an entry (the one read of it; flags may be torn from
  // the rest only if the peer breaks the protocol, which the copy's user
  // checks against).
  Desc Copy(uint32_t entry) {
    Desc d;
    std::memcpy(&d, &At(entry), sizeof(d));
    return d;
  }

  EventSuppress LoadDriverEvent() { return LoadEvent(layout_.driver_event); }
  void StoreDriverEvent(EventSuppress e) {
    StoreEvent(layout_.driver_event, e);
  }
  EventSuppress LoadDeviceEvent() { return LoadEvent(layout_.device_event); }
  void StoreDeviceEvent(EventSuppress e) {
    StoreEvent(layout_.device_event, e);
  }

  const RingLayout& layout() const { return layout_; }
  uint32_t size() const { return size_; }

 private:
  EventSuppress LoadEvent(size_t offset) {
    uint32_t word =
        std::atomic_ref<uint32_t>(Word(offset)).load(std::memory_order_acquire);
    EventSuppress e;
    std::memcpy(&e, &word, sizeof(e));
    return e;
  }
  void StoreEvent(size_t offset, EventSuppress e) {
    uint32_t word;
    std::memcpy(&word, &e, sizeof(word));
    std::atomic_ref<uint32_t>(Word(offset))
        .store(word, std::memory_order_release);
  }
  uint32_t& Word(size_t offset) {
    return *reinterpret_cast<uint32_t*>(ring_ + offset);
  }

  uint8_t* ring_;
  uint32_t size_;
  RingLayout layout_;
};

}  // namespace pvdisk::transport::virtio_packed

// QueueView: the parts of an NVMe queue pair's shared memory at the offsets
// LayoutFor() gives, with the atomic accesses both sides need. It names
// memory and decides nothing.
#pragma once

#include <cstdint>

#include "transport/nvme/format.h"
#include "transport/shared_index.h"

namespace pvdisk::transport::nvme {

class QueueView {
 public:
  // `ring_memory` holds LayoutFor(size).bytes and outlives the view.
  QueueView(uint8_t* ring_memory, uint32_t size)
      : ring_(ring_memory), size_(size), layout_(LayoutFor(size)) {}

  Command& Sq(uint32_t entry) {
    return reinterpret_cast<Command*>(ring_ + layout_.sq)[entry];
  }
  Completion& Cq(uint32_t entry) {
    return reinterpret_cast<Completion*>(ring_ + layout_.cq)[entry];
  }
  Doorbells& Bells() {
    return *reinterpret_cast<Doorbells*>(ring_ + layout_.doorbells);
  }
  // A completion's status word: release when handing the entry over (the
  // rest was written before), acquire when reading its phase.
  uint16_t LoadStatus(uint32_t entry) { return LoadAcquire(Cq(entry).status); }
  void StoreStatus(uint32_t entry, uint16_t status) {
    StoreRelease(Cq(entry).status, status);
  }

  uint32_t size() const { return size_; }
  const RingLayout& layout() const { return layout_; }

 private:
  uint8_t* ring_;
  uint32_t size_;
  RingLayout layout_;
};

}  // namespace pvdisk::transport::nvme

// Test helpers for the nvme ring tests: a queue pair of `size` entries in a
// shared region (ring memory at 0, the data area after it), both rings over
// it (driver through the frontend's mapping, device through CheckedGrants
// over the backend's), and the shared structures as the driver's mapping
// shows them.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "ring_memory.h"
#include "stats/queue_stats.h"
#include "transport/grant_mapper.h"
#include "transport/nvme/device_ring.h"
#include "transport/nvme/driver_ring.h"
#include "transport/nvme/format.h"
#include "transport/nvme/protocol.h"
#include "virtio_memory.h"

namespace pvdisk::transport::testing {

class NvmeMemory : public RingMemory {
 public:
  NvmeMemory(uint32_t size, uint32_t data_pages)
      : RingMemory(size, data_pages, NvmeProtocol().RingBytes(size)),
        size_(size),
        data_pages_(data_pages),
        layout_(nvme::LayoutFor(size)) {}

  nvme::Command& sq(uint32_t position) const {
    return reinterpret_cast<nvme::Command*>(front_ring() +
                                            layout_.sq)[position % size_];
  }
  nvme::Completion& cq(uint32_t position) const {
    return reinterpret_cast<nvme::Completion*>(front_ring() +
                                               layout_.cq)[position % size_];
  }
  nvme::Doorbells& bells() const {
    return *reinterpret_cast<nvme::Doorbells*>(front_ring() +
                                               layout_.doorbells);
  }
  uint32_t data_pages() const { return data_pages_; }

 private:
  uint32_t size_;
  uint32_t data_pages_;
  nvme::RingLayout layout_;
};

// The device side over `memory` with persistent grants checked against the
// data area.
struct NvmeDevice {
  NvmeDevice(const NvmeMemory& memory, const DeviceLimits& limits,
             RingConfig config)
      : persistent(NewPersistentGrants(memory.back_data())),
        grants(persistent.get(), memory.data_pages()) {
    config.stats = &stats;
    ring = std::make_unique<NvmeDeviceRing>(memory.back_ring(), memory.slots(),
                                            &grants, limits, config);
  }
  stats::QueueStats stats;
  std::unique_ptr<GrantMapper> persistent;
  CheckedGrants grants;
  std::unique_ptr<NvmeDeviceRing> ring;
};

}  // namespace pvdisk::transport::testing

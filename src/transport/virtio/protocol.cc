#include "transport/virtio/protocol.h"

#include "transport/virtio/device_ring.h"
#include "transport/virtio/driver_ring.h"
#include "transport/virtio/format.h"

namespace pvdisk::transport {
namespace {

class Virtio final : public Protocol {
 public:
  std::string_view name() const override { return "virtio"; }
  uint32_t max_ring_size() const override { return virtio::kMaxQueueSize; }
  size_t RingBytes(uint32_t slots) const override {
    return virtio::LayoutFor(slots).bytes;
  }
  // Header, status and an indirect table for max_segments + 2 descriptors.
  uint32_t TablePagesPerRequest(uint32_t max_segments) const override {
    return virtio::TablePagesPerRequest(max_segments);
  }
  std::unique_ptr<DriverRing> NewDriverRing(
      uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
      const RingConfig& config) const override {
    return std::make_unique<VirtioDriverRing>(ring_memory, slots, data_memory,
                                              config.notify);
  }
  std::unique_ptr<DeviceRing> NewDeviceRing(
      uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
      const DeviceLimits& limits, const RingConfig& config) const override {
    return std::make_unique<VirtioDeviceRing>(ring_memory, slots, grants,
                                              limits, config.notify);
  }
};

}  // namespace

const Protocol& VirtioProtocol() {
  static const Virtio protocol;
  return protocol;
}

}  // namespace pvdisk::transport

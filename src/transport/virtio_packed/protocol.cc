#include "transport/virtio_packed/protocol.h"

#include "transport/virtio/format.h"
#include "transport/virtio_packed/device_ring.h"
#include "transport/virtio_packed/driver_ring.h"
#include "transport/virtio_packed/format.h"

namespace pvdisk::transport {
namespace {

class VirtioPacked final : public Protocol {
 public:
  std::string_view name() const override { return "virtio-packed"; }
  uint32_t max_ring_size() const override {
    return virtio_packed::kMaxQueueSize;
  }
  size_t RingBytes(uint32_t slots) const override {
    return virtio_packed::LayoutFor(slots).bytes;
  }
  // The same table pages as the split queue: header, status and an indirect
  // table of max_segments + 2 entries of 16 bytes.
  uint32_t TablePagesPerRequest(uint32_t max_segments) const override {
    return virtio::TablePagesPerRequest(max_segments);
  }
  std::unique_ptr<DriverRing> NewDriverRing(
      uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
      const RingConfig& config) const override {
    return std::make_unique<PackedDriverRing>(ring_memory, slots, data_memory,
                                              config.notify);
  }
  std::unique_ptr<DeviceRing> NewDeviceRing(
      uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
      const DeviceLimits& limits, const RingConfig& config) const override {
    return std::make_unique<PackedDeviceRing>(ring_memory, slots, grants,
                                              limits, config.notify);
  }
};

}  // namespace

const Protocol& VirtioPackedProtocol() {
  static const VirtioPacked protocol;
  return protocol;
}

}  // namespace pvdisk::transport

#include "transport/nvme/protocol.h"

#include "transport/nvme/device_ring.h"
#include "transport/nvme/driver_ring.h"
#include "transport/nvme/format.h"

namespace pvdisk::transport {
namespace {

class Nvme final : public Protocol {
 public:
  std::string_view name() const override { return "nvme"; }
  uint32_t max_ring_size() const override { return nvme::kMaxQueueSize; }
  size_t RingBytes(uint32_t slots) const override {
    return nvme::LayoutFor(slots).bytes;
  }
  uint32_t TablePagesPerRequest(uint32_t max_segments) const override {
    return nvme::TablePagesPerRequest(max_segments);
  }
  std::unique_ptr<DriverRing> NewDriverRing(
      uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
      const RingConfig& config) const override {
    return std::make_unique<NvmeDriverRing>(ring_memory, slots, data_memory,
                                            config);
  }
  std::unique_ptr<DeviceRing> NewDeviceRing(
      uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
      const DeviceLimits& limits, const RingConfig& config) const override {
    return std::make_unique<NvmeDeviceRing>(ring_memory, slots, grants, limits,
                                            config);
  }
};

}  // namespace

const Protocol& NvmeProtocol() {
  static const Nvme protocol;
  return protocol;
}

}  // namespace pvdisk::transport

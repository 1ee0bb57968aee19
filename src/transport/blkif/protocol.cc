#include "transport/blkif/protocol.h"

#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/blkif/format.h"

namespace pvdisk::transport {
namespace {

class Blkif final : public Protocol {
 public:
  std::string_view name() const override { return "blkif"; }
  // 4096 slots of 112 bytes: a 112-page ring (Xen's own limit is 16 pages).
  uint32_t max_ring_size() const override { return 4096; }
  size_t RingBytes(uint32_t slots) const override {
    return blkif::RingBytes(slots);
  }
  // Indirect pages of 512 segments, only when requests may exceed 11.
  uint32_t TablePagesPerRequest(uint32_t max_segments) const override {
    if (max_segments <= static_cast<uint32_t>(blkif::kMaxDirectSegments)) {
      return 0;
    }
    return (max_segments + blkif::kSegmentsPerIndirectPage - 1) /
           blkif::kSegmentsPerIndirectPage;
  }
  std::unique_ptr<DriverRing> NewDriverRing(
      uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
      const RingConfig& config) const override {
    return std::make_unique<BlkifDriverRing>(ring_memory, slots, data_memory,
                                             config.notify);
  }
  std::unique_ptr<DeviceRing> NewDeviceRing(
      uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
      const DeviceLimits& limits, const RingConfig& config) const override {
    return std::make_unique<BlkifDeviceRing>(ring_memory, slots, grants, limits,
                                             config.notify);
  }
};

}  // namespace

const Protocol& BlkifProtocol() {
  static const Blkif protocol;
  return protocol;
}

}  // namespace pvdisk::transport

// Protocol: what a ring protocol ("frontend" on the command line) provides
// to the rest of pvdisk. The FUSE layer, the frontend queue (splitting,
// staging, page pool), the backend loop, the engines and the stats know only
// this interface; everything protocol-specific lives in the protocol's own
// folder (src/transport/blkif/, virtio/, virtio_packed/, nvme/). Adding one:
// docs/adding-a-frontend.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/device_ring.h"
#include "transport/driver_ring.h"
#include "transport/grant_mapper.h"
#include "transport/ring_request.h"

namespace pvdisk::transport {

class Protocol {
 public:
  virtual ~Protocol() = default;

  // The --frontend name.
  virtual std::string_view name() const = 0;
  // Ring sizes allowed: powers of two from 32 to this.
  virtual uint32_t max_ring_size() const = 0;
  // Bytes of shared memory the ring of `slots` entries takes, a multiple of
  // 4096. The data area follows it.
  virtual size_t RingBytes(uint32_t slots) const = 0;
  // Pages each request id owns in the data area for out-of-ring tables
  // (indirect segment pages, descriptor tables, headers), given the most
  // data segments a request may carry.
  virtual uint32_t TablePagesPerRequest(uint32_t max_segments) const = 0;

  // The driver side, over the frontend's mappings; initialises the ring.
  virtual std::unique_ptr<DriverRing> NewDriverRing(
      uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
      const RingConfig& config) const = 0;
  // The device side, over the backend's mapping of the ring; reaches data
  // pages only through `grants`.
  virtual std::unique_ptr<DeviceRing> NewDeviceRing(
      uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
      const DeviceLimits& limits, const RingConfig& config) const = 0;
};

// The registration point: the protocol called `name`, or InvalidArgument
// naming the allowed ones.
absl::StatusOr<const Protocol*> FindProtocol(std::string_view name);
std::vector<std::string_view> ProtocolNames();

}  // namespace pvdisk::transport

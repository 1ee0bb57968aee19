// DeviceSide: the backend's view of one queue's shared region: a mapping of
// its own (the whole region with persistent grants, the ring pages only
// without), the grant mapper that reaches the data pages, and the device
// ring. Built the same way by an in-process backend (Queue) and by a backend
// process (process/backend_host.h), which sees nothing but the region.
#pragma once

#include <sys/uio.h>

#include <memory>

#include "absl/status/statusor.h"
#include "stats/queue_stats.h"
#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {

struct QueueOptions;

struct DeviceSide {
  std::unique_ptr<RegionMapping> mapping;
  std::unique_ptr<GrantMapper> grants;
  std::unique_ptr<DeviceRing> ring;
  // The mapping of the data pool, for the engine to register as a fixed
  // buffer; empty when grants are not persistent.
  iovec pool{nullptr, 0};
};

// Maps `region` (laid out for `options`, whose driver ring was initialised)
// and builds the device side over it. `region` and `stats` must outlive it.
absl::StatusOr<DeviceSide> AttachDeviceSide(const QueueOptions& options,
                                            const SharedRegion* region,
                                            stats::QueueStats* stats);

}  // namespace pvdisk::transport

#include "transport/device_side.h"

#include "base/status_macros.h"
#include "transport/memory_budget.h"
#include "transport/queue.h"

namespace pvdisk::transport {

absl::StatusOr<DeviceSide> AttachDeviceSide(const QueueOptions& options,
                                            const SharedRegion* region,
                                            stats::QueueStats* stats) {
  const Protocol& protocol = ProtocolOf(options);
  const QueueMemory memory = QueueMemoryOf(options);
  if (region->size() != memory.region_bytes) {
    return absl::InvalidArgumentError(
        "a queue's shared region does not have the size its options need");
  }
  DeviceSide side;
  // With per-request grants the backend maps the ring only: a data page is
  // addressable only while a request it carries is being served.
  PVDISK_ASSIGN_OR_RETURN(
      side.mapping,
      options.persistent ? region->Map() : region->MapFirst(memory.ring_bytes));
  uint8_t* back = side.mapping->base();
  const uint32_t region_pages = memory.pool_pages + memory.table_pages;
  side.grants = options.persistent
                    ? NewPersistentGrants(back + memory.ring_bytes,
                                          region_pages, options.lent)
                    : NewPerRequestGrants(region, memory.ring_bytes, stats);
  DeviceLimits limits;
  limits.disk_sectors = options.disk_sectors;
  limits.data_pages = options.lent.empty()
                          ? region_pages
                          : LentFirstPage(region_pages) + options.lent.pages();
  limits.max_segments = options.max_segments;
  limits.read_only = options.read_only;
  limits.serial = options.serial;
  side.ring = protocol.NewDeviceRing(back, options.ring_size, side.grants.get(),
                                     limits, RingConfigOf(options, stats));
  if (options.persistent) {
    side.pool =
        iovec{back + memory.ring_bytes, size_t{memory.pool_pages} * 4096};
  }
  return side;
}

}  // namespace pvdisk::transport

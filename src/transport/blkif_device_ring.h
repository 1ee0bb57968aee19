// The blkif backend ring (Xen blkback's side of io/ring.h). Each request is
// copied out of the shared slot once (no double fetch) and validated before
// anything uses it: operation, segment count, page indices, sector ranges
// inside a page, and the range against the end of the disk.
#pragma once

#include <cstdint>

#include "transport/blkif_format.h"
#include "transport/device_ring.h"
#include "transport/ring_index.h"

namespace pvdisk::transport {

struct BlkifDeviceLimits {
  uint64_t disk_sectors = 0;  // requests must end at or before this sector
  uint32_t data_pages = 0;    // valid grefs are 0 .. data_pages - 1
  uint32_t max_segments = blkif::kMaxDirectSegments;
  bool read_only = false;  // writes and discards are invalid
};

class BlkifDeviceRing final : public DeviceRing {
 public:
  // `ring_memory` and `data_memory` are the backend's own mapping of the
  // queue's ring and data pages; both must outlive this object. The frontend
  // must have initialised the ring already.
  BlkifDeviceRing(uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
                  const BlkifDeviceLimits& limits);

  TakeResult TakeRequest(DeviceRequest* out) override;
  void PutResponse(const DeviceRequest& request, int result) override;
  PushResult PublishResponses() override;
  bool FinalCheckForRequests() override;

 private:
  // Checks the private copy `slot` and fills `out`.
  TakeResult Decode(const blkif::Slot& slot, DeviceRequest* out) const;
  TakeResult DecodeReadWrite(const blkif::Request& request,
                             DeviceRequest* out) const;
  bool RangeInsideDisk(uint64_t sector, uint64_t count) const;
  RingIdx Unconsumed(RingIdx prod) const;

  blkif::SharedRingHeader* header_;
  blkif::Slot* slots_;
  uint32_t size_;
  uint8_t* data_;
  BlkifDeviceLimits limits_;
  RingIdx req_cons_ = 0;      // next request to take
  RingIdx rsp_prod_pvt_ = 0;  // next response slot, not yet published
};

}  // namespace pvdisk::transport

// The blkif backend ring (Xen blkback's side of io/ring.h). Each request is
// copied out of the shared slot once (no double fetch), and so is an
// indirect request's segment list; everything is validated on the private
// copies before anything uses it: operation, segment count against the
// negotiated maximum, indirect and data page indices, sector ranges inside a
// page, and the range against the end of the disk.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/blkif/format.h"
#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/ring_index.h"

namespace pvdisk::transport {

// blkif checks against the generic limits; max_segments above 11 means
// feature-max-indirect-segments was offered.
using BlkifDeviceLimits = DeviceLimits;

class BlkifDeviceRing final : public DeviceRing {
 public:
  // `ring_memory` is the backend's own mapping of the queue's ring; `grants`
  // maps indirect pages to read them. Both must outlive this object. The
  // frontend must have initialised the ring already.
  BlkifDeviceRing(uint8_t* ring_memory, uint32_t slots, GrantMapper* grants,
                  const BlkifDeviceLimits& limits, NotifyMode notify);

  TakeResult TakeRequest(DeviceRequest* out) override;
  void PutResponse(const DeviceRequest& request, int result) override;
  PushResult PublishResponses() override;
  bool FinalCheckForRequests() override;
  bool HasRequests() override;

 private:
  // Checks the private copy `slot` and fills `out`.
  TakeResult Decode(const blkif::Slot& slot, DeviceRequest* out);
  TakeResult DecodeIndirect(const blkif::IndirectRequest& request,
                            DeviceRequest* out);
  // Validates `count` segments and appends them; sets out->num_sectors.
  TakeResult AddSegments(const blkif::Segment* segments, uint32_t count,
                         uint64_t sector, DeviceRequest* out) const;
  bool RangeInsideDisk(uint64_t sector, uint64_t count) const;
  RingIdx Unconsumed(RingIdx prod) const;

  blkif::SharedRingHeader* header_;
  blkif::Slot* slots_;
  uint32_t size_;
  GrantMapper* grants_;
  BlkifDeviceLimits limits_;
  NotifyMode notify_;
  RingIdx req_cons_ = 0;      // next request to take
  RingIdx rsp_prod_pvt_ = 0;  // next response slot, not yet published
  // Private copy of an indirect request's segment list.
  std::vector<blkif::Segment> indirect_copy_;
};

}  // namespace pvdisk::transport

// The blkif frontend ring (Xen blkfront's side of io/ring.h): requests go in
// at req_prod_pvt, are published with RING_PUSH_REQUESTS_AND_CHECK_NOTIFY,
// and responses are consumed from rsp_cons with RING_FINAL_CHECK_FOR_RESPONSES
// before sleeping. Requests of more than 11 segments become BLKIF_OP_INDIRECT
// with their segment list in the request's indirect pages.
#pragma once

#include <cstdint>

#include "transport/blkif/format.h"
#include "transport/driver_ring.h"
#include "transport/ring_index.h"

namespace pvdisk::transport {

class BlkifDriverRing final : public DriverRing {
 public:
  // Initialises the shared ring at `ring_memory` (SHARED_RING_INIT: indices
  // 0, event indices 1). `slots` is a power of two; the memory must hold
  // blkif::RingBytes(slots) bytes. `data_memory` is the frontend's mapping of
  // the data pages, where indirect segment lists are written. Both must
  // outlive this object.
  BlkifDriverRing(uint8_t* ring_memory, uint32_t slots, uint8_t* data_memory,
                  NotifyMode notify);

  uint32_t FreeSlots() const override;
  // nr_sectors is 64 bits wide: any range fits one request.
  uint64_t MaxRangeSectors(BlockOp) const override { return UINT64_MAX; }
  void Write(const RingRequest& request) override;
  PushResult Publish() override;
  int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) override;
  bool FinalCheckForResponses() override;

 private:
  blkif::SharedRingHeader* header_;
  blkif::Slot* slots_;
  uint32_t size_;
  uint8_t* data_;
  NotifyMode notify_;
  RingIdx req_prod_pvt_ = 0;  // next slot to fill, not yet published
  RingIdx rsp_cons_ = 0;      // next response to consume
};

}  // namespace pvdisk::transport

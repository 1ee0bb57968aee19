// The virtio split virtqueue, device side, serving virtio-blk requests from
// a driver it does not trust.
//
// Each request's descriptor chain is copied out of the shared table (and an
// indirect table out of the data area) once, then checked: descriptor
// indices below the queue size, no loops and no chain longer than the queue,
// indirect tables of a sane length with no nested indirect. The copied chain
// goes to the shared virtio-blk decoder (blk_decoder.h) for the request's own
// rules. A request that fails is answered with VIRTIO_BLK_S_IOERR (when its
// status byte can be found) and counted by the caller in invalid_reqs.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/virtio/blk_chain.h"
#include "transport/virtio/blk_decoder.h"
#include "transport/virtio/format.h"
#include "transport/virtio/queue_view.h"

namespace pvdisk::transport {

class VirtioDeviceRing final : public DeviceRing {
 public:
  // `ring_memory` is the backend's own mapping of the queue's ring; the data
  // area is reached only through `grants`. Both must outlive this object.
  VirtioDeviceRing(uint8_t* ring_memory, uint32_t size, GrantMapper* grants,
                   const DeviceLimits& limits, NotifyMode notify);

  TakeResult TakeRequest(DeviceRequest* out) override;
  void PutResponse(const DeviceRequest& request, int result) override;
  PushResult PublishResponses() override;
  bool FinalCheckForRequests() override;
  bool HasRequests() override;

 private:
  // Copies the chain starting at `head` into chain_. False if malformed.
  bool CopyChain(uint16_t head);
  bool CopyIndirectTable(const virtio::Desc& pointer);

  virtio::QueueView q_;
  uint32_t size_;
  virtio::BlkDecoder decoder_;
  NotifyMode notify_;

  uint16_t last_avail_ = 0;             // next available entry to take
  uint16_t used_shadow_ = 0;            // next used.idx, not yet published
  uint16_t used_published_ = 0;         // used.idx as last published
  std::vector<virtio::Buffer> chain_;   // private copy of one chain
  std::vector<virtio::Desc> indirect_;  // private copy of an indirect table
  bool used_indirect_ = false;  // the last chain copied went through one
};

}  // namespace pvdisk::transport

// The virtio split virtqueue, device side, serving virtio-blk requests from
// a driver it does not trust.
//
// Each request's descriptor chain is copied out of the shared table (and an
// indirect table out of the data area) once, then checked: descriptor
// indices below the queue size, no loops and no chain longer than the queue,
// indirect tables of a sane length with no nested indirect, readable
// descriptors before writable ones, a 16-byte header, a status byte, data
// lengths in whole sectors, and the sector range inside the disk. A request
// that fails is answered with VIRTIO_BLK_S_IOERR (when its status byte can be
// found) and counted by the caller in invalid_reqs.
//
// pvdisk's stricter rules, which its own driver follows: the header is alone
// in its descriptor; every data descriptor is 512-byte aligned in address and
// length; DISCARD and WRITE_ZEROES carry exactly one segment.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
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
  static constexpr uint64_t kNoStatus = UINT64_MAX;

  // Copies the chain starting at `head` into chain_. False if malformed.
  bool CopyChain(uint16_t head);
  bool CopyIndirectTable(const virtio::Desc& pointer);
  // Checks the copied chain and decodes it into `out`.
  TakeResult Decode(DeviceRequest* out);
  TakeResult DecodeData(const virtio::BlkHeader& header, DeviceRequest* out);
  TakeResult DecodeDiscard(const virtio::BlkHeader& header, DeviceRequest* out);
  TakeResult AnswerGetId(DeviceRequest* out);
  // Whether [addr, addr + len) lies inside the data area.
  bool InsideData(uint64_t addr, uint64_t len) const;
  // Copies `len` bytes at data offset `addr` into `to` (or from `from`),
  // mapping the pages through the grants. False if mapping failed.
  bool CopyFromData(uint64_t addr, void* to, size_t len);
  bool CopyToData(uint64_t addr, const void* from, size_t len);

  virtio::QueueView q_;
  uint32_t size_;
  GrantMapper* grants_;
  DeviceLimits limits_;
  NotifyMode notify_;
  uint64_t data_bytes_;

  uint16_t last_avail_ = 0;             // next available entry to take
  uint16_t used_shadow_ = 0;            // next used.idx, not yet published
  uint16_t used_published_ = 0;         // used.idx as last published
  std::vector<virtio::Desc> chain_;     // private copy of one chain
  std::vector<virtio::Desc> indirect_;  // private copy of an indirect table
  bool used_indirect_ = false;  // the last chain copied went through one
};

}  // namespace pvdisk::transport

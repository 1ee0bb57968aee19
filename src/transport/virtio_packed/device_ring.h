// The virtio packed virtqueue, device side, serving virtio-blk requests from
// a driver it does not trust.
//
// The device takes chains in ring order from its position counter. Each
// entry of a chain is copied once and checked before the chain goes to the
// shared virtio-blk decoder (virtio/blk_decoder.h):
//
// - the first entry is available in the current lap (AVAIL = the device's
//   wrap counter, USED = its inverse); AVAIL = USED = the wrap counter at a
//   position the device has not used is a wrap inconsistency: invalid, one
//   entry consumed;
// - every further entry of the chain is available in its own lap, so a
//   chain that runs past the ring's end must flip its bits there;
// - the device never reads an entry it still owns (taken, not answered): a
//   driver that hands one over again is caught at the first such entry, and
//   no chain is longer than the ring;
// - an indirect entry is alone (no NEXT, not after direct entries), its
//   table holds whole entries, at least one, no more than a request may
//   need, and none of them indirect;
// - the buffer id (in the chain's last entry) is below the ring size and not
//   in flight.
//
// A chain that breaks the first four rules has no trusted status byte; one
// with a bad buffer id does, if its shape is sound. Either is kInvalid, and
// answered with one used entry that skips the entries consumed.
//
// DeviceRequest::id carries what the answer needs: the buffer id (bits
// 0-15), the entries consumed (bits 16-31), and whether the request holds
// its buffer id (bit 32) and frees it when answered.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/virtio/blk_chain.h"
#include "transport/virtio/blk_decoder.h"
#include "transport/virtio_packed/ring_view.h"

namespace pvdisk::transport {

class PackedDeviceRing final : public DeviceRing {
 public:
  // `ring_memory` is the backend's own mapping of the queue's ring; the data
  // area is reached only through `grants`. Both must outlive this object.
  PackedDeviceRing(uint8_t* ring_memory, uint32_t size, GrantMapper* grants,
                   const DeviceLimits& limits, NotifyMode notify);

  TakeResult TakeRequest(DeviceRequest* out) override;
  void PutResponse(const DeviceRequest& request, int result) override;
  PushResult PublishResponses() override;
  bool FinalCheckForRequests() override;
  bool HasRequests() override;

 private:
  // How the entry at avail_count_ looks.
  enum class Head { kNone, kAvailable, kInconsistent };
  Head LookAtHead();
  // Copies the chain from avail_count_ into chain_, setting *entries to the
  // entries consumed and *buffer_id to the last one's id. False if the
  // chain breaks the rules.
  bool CopyChain(uint32_t* entries, uint16_t* buffer_id);
  bool CopyIndirectTable(const virtio_packed::Desc& pointer);
  void SetKicks(virtio_packed::EventSuppress event);

  virtio_packed::RingView q_;
  uint32_t size_;
  virtio::BlkDecoder decoder_;
  NotifyMode notify_;

  // Position counters (virtio_packed/format.h): next entry to take, next
  // entry to mark used, and used as of the last PublishResponses(). The
  // device owns the entries [used_count_, avail_count_).
  uint32_t avail_count_ = 0;
  uint32_t used_count_ = 0;
  uint32_t used_published_ = 0;
  // Used entries written but not yet handed over: (entry, flags).
  std::vector<std::pair<uint32_t, uint16_t>> pending_used_;
  std::vector<bool> buffer_in_flight_;
  std::vector<virtio::Buffer> chain_;          // private copy of one chain
  std::vector<virtio_packed::Desc> indirect_;  // of an indirect table
  bool used_indirect_ = false;
  bool kicks_disabled_ = false;
};

}  // namespace pvdisk::transport

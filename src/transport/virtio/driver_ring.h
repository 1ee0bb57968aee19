// The virtio split virtqueue, driver side, carrying virtio-blk requests.
//
// A request becomes a descriptor chain: the 16-byte header (device-readable),
// its data segments (device-writable for IN), and the 1-byte status
// (device-writable). Header and status live in the request id's table pages.
// Chains of up to kMaxDirectDescriptors go straight into the descriptor
// table; longer ones go into an indirect table (VIRTIO_RING_F_INDIRECT_DESC)
// in the id's table pages and take one descriptor.
//
// Notifications: with NotifyMode::kEventIdx (VIRTIO_RING_F_EVENT_IDX), kick
// iff avail.idx passed the device's avail_event; with kAlways, the feature is
// off and the device's used.flags NO_NOTIFY flag decides (and the driver sets
// avail.flags NO_INTERRUPT while it consumes).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/driver_ring.h"
#include "transport/virtio/blk_chain.h"
#include "transport/virtio/format.h"
#include "transport/virtio/queue_view.h"

namespace pvdisk::transport {

class VirtioDriverRing final : public DriverRing {
 public:
  // Chains longer than this use an indirect table: header + 2 data
  // segments + status fit directly.
  static constexpr uint32_t kMaxDirectDescriptors = 4;

  // Initialises the queue at `ring_memory` (virtio::LayoutFor(size).bytes,
  // zeroed). `data_memory` is the frontend's mapping of the data area.
  VirtioDriverRing(uint8_t* ring_memory, uint32_t size, uint8_t* data_memory,
                   NotifyMode notify);

  uint32_t FreeSlots() const override { return num_free_; }
  bool HasRoomFor(BlockOp op, uint32_t segment_count) const override;
  uint64_t MaxRangeSectors(BlockOp op) const override {
    return op == BlockOp::kDiscard ? virtio::kMaxDiscardSectors
                                   : virtio::kMaxWriteZeroesSectors;
  }
  void Write(const RingRequest& request) override;
  PushResult Publish() override;
  int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) override;
  bool FinalCheckForResponses() override;

 private:
  static constexpr uint32_t kNoId = UINT32_MAX;
  // Descriptors a request takes: header, status, and its data segments or
  // (discard, write-zeroes) its one range segment; 1 if indirect.
  uint32_t DescriptorsFor(BlockOp op, uint32_t segment_count) const;
  uint16_t TakeDescriptor();
  void FreeChain(uint16_t head);

  virtio::QueueView q_;
  uint32_t size_;
  uint8_t* data_;
  NotifyMode notify_;
  virtio::Desc* desc_;

  std::vector<uint16_t> next_;  // private chain and free-list links
  uint16_t free_head_ = 0;
  uint32_t num_free_;
  uint16_t avail_shadow_ = 0;     // next avail.idx, not yet published
  uint16_t avail_published_ = 0;  // avail.idx as last published
  uint16_t last_used_ = 0;        // next used entry to consume
  // Per head descriptor: the request id, how many descriptors the chain
  // took, and where its status byte is (byte offset into the data area).
  std::vector<uint32_t> id_of_head_;
  std::vector<uint16_t> chain_length_;
  std::vector<uint64_t> status_offset_;
  std::vector<virtio::Buffer> chain_;  // scratch for one request
};

}  // namespace pvdisk::transport

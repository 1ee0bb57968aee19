// The virtio packed virtqueue, driver side, carrying virtio-blk requests.
//
// A request becomes a chain (virtio/blk_chain.h: header, one buffer per data
// page, status; header and status in the request id's table pages) written
// into consecutive ring entries from the driver's position, wrapping at the
// ring's end; chains longer than kMaxDirectDescriptors go into an indirect
// table in the id's table pages and take one entry. The chain's buffer id
// (one per chain in flight, 0 .. size - 1, not the request id) is in every
// entry; the device answers with one used entry per chain, in any order,
// and the driver then skips as many entries as the chain took.
//
// Write() fills every entry of a chain but the first one's flags; Publish()
// writes those (release), so that the device never sees half a chain.
//
// Notifications: with NotifyMode::kEventIdx the device's event suppression
// is honoured in all three modes (a DESC position means: kick iff this
// publish passed it); with kAlways only ENABLE/DISABLE count. While
// consuming under kAlways, the driver disables interrupts; its final check
// re-enables them (kAlways) or names the next used position (kEventIdx).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "transport/driver_ring.h"
#include "transport/virtio/blk_chain.h"
#include "transport/virtio/format.h"
#include "transport/virtio_packed/ring_view.h"

namespace pvdisk::transport {

class PackedDriverRing final : public DriverRing {
 public:
  // Chains longer than this use an indirect table (as on the split queue:
  // header + 2 data segments + status fit directly).
  static constexpr uint32_t kMaxDirectDescriptors = 4;

  // Initialises the queue at `ring_memory` (virtio_packed::LayoutFor(size)
  // .bytes). `data_memory` is the frontend's mapping of the data area.
  PackedDriverRing(uint8_t* ring_memory, uint32_t size, uint8_t* data_memory,
                   NotifyMode notify);

  uint32_t FreeSlots() const override { return num_free_; }
  bool HasRoomFor(BlockOp op, uint32_t segment_count) const override;
  uint64_t MaxRangeSectors(BlockOp op) const override {
    return op == BlockOp::kDiscard ? virtio::kMaxDiscardSectors
                                   : virtio::kMaxWriteZeroesSectors;
  }
  void Write(const RingRequest& request) override;
  PushResult Publish() override;
  // Returns -EPROTO when the device marks as used an entry whose buffer id
  // is not in flight (nothing after it can be trusted).
  int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) override;
  bool FinalCheckForResponses() override;

 private:
  static constexpr uint32_t kNoRequest = UINT32_MAX;
  // Ring entries a request takes: its chain, or 1 if indirect.
  uint32_t DescriptorsFor(BlockOp op, uint32_t segment_count) const;
  // Whether the entry at used_count_ has been marked used by the device.
  bool UsedWaiting();
  void SetInterrupts(virtio_packed::EventSuppress event);

  virtio_packed::RingView q_;
  uint32_t size_;
  uint8_t* data_;
  NotifyMode notify_;

  // Position counters (virtio_packed/format.h): next entry to write, as of
  // the last Publish(), and next entry to consume.
  uint32_t avail_count_ = 0;
  uint32_t published_count_ = 0;
  uint32_t used_count_ = 0;
  uint32_t num_free_;
  // First entries written but not yet handed over: (entry, flags).
  std::vector<std::pair<uint32_t, uint16_t>> pending_heads_;
  // Per buffer id: the request id, entries taken, where the status byte is.
  std::vector<uint16_t> free_buffer_ids_;
  std::vector<uint32_t> request_of_;
  std::vector<uint32_t> descriptors_of_;
  std::vector<uint64_t> status_offset_;
  bool interrupts_disabled_ = false;
  std::vector<virtio::Buffer> chain_;  // scratch for one request
};

}  // namespace pvdisk::transport

// The NVMe queue pair, driver side.
//
// A request becomes one command in the SQ: Read, Write (data by PRPs or
// SGLs, data_pointer.h), Flush, Write Zeroes, or Dataset Management with
// the deallocate attribute for a discard (one range, in the request id's
// first table page). Its command id is the request id modulo the queue
// size (REQUIRES: no two requests in flight share it; FrontendQueue's ids
// are below the size, so the command id is the request id and a trace
// follows the request through the device), mapped back to the request id
// when its completion comes.
//
// Flow control: at most size - 1 commands in flight (written and not yet
// consumed), which bounds both the SQ's and the CQ's occupancy, so the
// completion's SQ head needs no tracking. Consumed completions are handed
// back through the CQ head doorbell before the next SQ tail is published.
//
// Notifications: Publish() stores the SQ tail doorbell and kicks always
// (--notify always: plain doorbells) or when the device's SQ EventIdx lies
// in what it published (event-idx: shadow doorbells). The final check arms
// the CQ EventIdx at the next completion expected (event-idx).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/driver_ring.h"
#include "transport/nvme/format.h"
#include "transport/nvme/queue_view.h"

namespace pvdisk::transport {

class NvmeDriverRing final : public DriverRing {
 public:
  // Initialises the queue pair at `ring_memory` (nvme::LayoutFor(size)
  // .bytes). `data_memory` is the frontend's mapping of the data area.
  NvmeDriverRing(uint8_t* ring_memory, uint32_t size, uint8_t* data_memory,
                 const RingConfig& config);

  uint32_t FreeSlots() const override { return size_ - 1 - in_flight_; }
  uint64_t MaxRangeSectors(BlockOp op) const override;
  // PRPs cannot describe a hole: only the first segment may start inside
  // a page, only the last may end inside one.
  bool NeedsGaplessSegments() const override {
    return data_pointer_ == DataPointerMode::kPrp;
  }
  void Write(const RingRequest& request) override;
  PushResult Publish() override;
  // Returns -EPROTO when the device completes a command id not in flight
  // (nothing after it can be trusted).
  int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) override;
  bool FinalCheckForResponses() override;

 private:
  static constexpr uint32_t kNoRequest = UINT32_MAX;
  bool CompletionWaiting();

  nvme::QueueView q_;
  uint32_t size_;
  uint32_t mask_;
  uint8_t* data_;
  NotifyMode notify_;
  DataPointerMode data_pointer_;

  // Free-running positions: SQ entries written, as of the last Publish();
  // CQ entries consumed.
  uint32_t sq_tail_ = 0;
  uint32_t sq_published_ = 0;
  uint32_t cq_head_ = 0;
  uint32_t in_flight_ = 0;
  std::vector<uint32_t> request_of_;  // by command id
};

}  // namespace pvdisk::transport

// The NVMe queue pair, device side, serving a driver it does not trust.
//
// Commands are taken in SQ order up to the SQ tail doorbell, each copied
// out of the SQ once and then checked: a tail doorbell outside the queue,
// or a CQ head doorbell outside it or past the completions published, is an
// impossible index (kRingBroken). A command is taken only while its
// completion has room in the CQ (SQ entries taken minus CQ entries the
// driver consumed stays below the queue size), so no completion overwrites
// one the driver has not read.
//
// Each command is answered with the status a driver expects: Invalid
// Opcode (kUnsupported) for an opcode other than Flush, Write, Read, Write
// Zeroes and Dataset Management; Command ID Conflict for a command id
// already in flight; Invalid Namespace; Invalid Field (fused operations,
// reserved bits, MDTS exceeded, more than one DSM range, a PRP list that
// loops); LBA Out of Range; Attempted Write to Read Only Range; the PRP and
// SGL statuses of data_pointer.h (kInvalid, with the status kept in
// DeviceRequest::reply_offset). I/O errors become Unrecovered Read Error or
// Write Fault. Dataset Management without the deallocate attribute is a
// hint and is answered at once (kAnswered).
//
// DeviceRequest::id is the command id (bits 0-15) and whether the request
// holds it (bit 32) and frees it when answered.
//
// Notifications: the device arms the SQ EventIdx (event-idx) before it
// sleeps; it interrupts by the driver's CQ EventIdx (event-idx) or always,
// in both cases after --irq-coalesce let it (irq_coalescer.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "transport/data_area.h"
#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/nvme/data_pointer.h"
#include "transport/nvme/irq_coalescer.h"
#include "transport/nvme/queue_view.h"

namespace pvdisk::transport {

class NvmeDeviceRing final : public DeviceRing {
 public:
  // `ring_memory` is the backend's own mapping of the queue's ring memory;
  // the data area is reached only through `grants`. Both outlive this.
  NvmeDeviceRing(uint8_t* ring_memory, uint32_t size, GrantMapper* grants,
                 const DeviceLimits& limits, const RingConfig& config);

  TakeResult TakeRequest(DeviceRequest* out) override;
  void PutResponse(const DeviceRequest& request, int result) override;
  PushResult PublishResponses() override;
  bool FinalCheckForRequests() override;
  bool HasRequests() override;

 private:
  // The SQ tail doorbell, if inside the queue.
  bool LoadSqTail(uint32_t* tail);
  // Catches up with the CQ head doorbell; false if it is impossible.
  bool UpdateCqHead();
  // Checks `command` and decodes it into `out`; the status that answers it
  // (kScSuccess for a valid one). Sets *answered for a command that needs
  // no I/O.
  uint16_t Decode(const nvme::Command& command, DeviceRequest* out,
                  bool* answered);
  uint16_t DecodeData(const nvme::Command& command, DeviceRequest* out);
  uint16_t DecodeDsm(const nvme::Command& command, DeviceRequest* out,
                     bool* answered);
  // Whether [slba, slba + blocks) lies inside the disk.
  bool InsideDisk(uint64_t slba, uint64_t blocks) const;

  nvme::QueueView q_;
  uint32_t size_;
  uint32_t mask_;
  DataArea area_;
  nvme::DataPointerDecoder decoder_;
  DeviceLimits limits_;
  NotifyMode notify_;
  nvme::IrqCoalescer coalescer_;
  stats::QueueStats* stats_;

  // Free-running positions: SQ entries taken; CQ entries written, published,
  // consumed by the driver (as its doorbell said), and published as of the
  // last interrupt decision.
  uint32_t sq_head_ = 0;
  uint32_t cq_tail_ = 0;
  uint32_t cq_published_ = 0;
  uint32_t cq_head_ = 0;
  uint32_t irq_from_ = 0;
  // Commands taken and not yet answered.
  uint32_t outstanding_ = 0;
  // Completions written but not handed over: (entry, status word).
  std::vector<std::pair<uint32_t, uint16_t>> pending_status_;
  std::vector<bool> id_in_flight_;  // by command id
};

}  // namespace pvdisk::transport

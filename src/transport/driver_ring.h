// The frontend (driver) side of a ring protocol: encode requests, publish them
// with the protocol's notification rule, consume responses. One
// implementation per protocol. Not thread-safe: the owning
// FrontendQueue serialises calls under its lock.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "transport/ring_request.h"

namespace pvdisk::transport {

class DriverRing {
 public:
  virtual ~DriverRing() = default;

  // Ring entries (slots or descriptors) still free.
  virtual uint32_t FreeSlots() const = 0;

  // Whether a request of operation `op` with `segment_count` data segments
  // fits now.
  virtual bool HasRoomFor(BlockOp op, uint32_t segment_count) const {
    (void)op;
    (void)segment_count;
    return FreeSlots() > 0;
  }

  // Whether a request's segments must be gapless: every one but the first
  // starting at its page's start, every one but the last ending at its
  // page's end (NVMe's PRPs cannot say otherwise). The FrontendQueue then
  // merges only requests that keep them so.
  virtual bool NeedsGaplessSegments() const { return false; }

  // The most sectors one kDiscard or kWriteZeroes request can carry (what
  // the protocol's range field holds, or the limit its device advertises).
  // The FrontendQueue splits longer ranges.
  virtual uint64_t MaxRangeSectors(BlockOp op) const = 0;

  // Writes `request` into the ring without publishing it.
  // REQUIRES: HasRoomFor(request.op, request.segment_count), and for a range
  // request num_sectors <= MaxRangeSectors(request.op).
  virtual void Write(const RingRequest& request) = 0;

  // Publishes everything written since the last call and decides, by the
  // protocol's rule, whether the backend must be kicked.
  virtual PushResult Publish() = 0;

  // Calls `on_response(id, result)` for each response published by the
  // backend, in ring order; result is 0, -EIO or -EOPNOTSUPP. Returns how
  // many, or -EPROTO if the backend published an impossible index (then
  // nothing is consumed).
  virtual int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) = 0;

  // Asks to be notified of the next response, then checks again: true when a
  // response arrived meanwhile and the caller must consume again instead of
  // sleeping.
  virtual bool FinalCheckForResponses() = 0;
};

}  // namespace pvdisk::transport

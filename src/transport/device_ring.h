// The backend (device) side of a ring protocol: take requests (copied once,
// then validated as if written by a stranger), put responses, publish them
// with the protocol's notification rule. One implementation per protocol.
// Used by one backend thread only.
#pragma once

#include <string>

#include "transport/ring_request.h"

namespace pvdisk::transport {

// What a device ring checks requests against.
struct DeviceLimits {
  uint64_t disk_sectors = 0;  // requests must end at or before this sector
  uint32_t data_pages = 0;    // the data area: pages 0 .. data_pages - 1
  // Most data segments per request (blkif: above 11, indirect requests are
  // accepted; virtio: seg_max).
  uint32_t max_segments = 11;
  bool read_only = false;  // writes and discards are invalid
  // The disk's serial number, for protocols that can ask (virtio GET_ID).
  std::string serial;
};

class DeviceRing {
 public:
  virtual ~DeviceRing() = default;

  // Takes the next request, if any, into `out`. On kInvalid and kUnsupported,
  // out->id and out->wire_op are set so that the caller can answer it.
  virtual TakeResult TakeRequest(DeviceRequest* out) = 0;

  // Writes the response for `request` (result: 0, -EOPNOTSUPP, or any other
  // negative errno for a failure) without publishing it.
  virtual void PutResponse(const DeviceRequest& request, int result) = 0;

  // Publishes the responses put since the last call and decides whether the
  // frontend must be interrupted.
  virtual PushResult PublishResponses() = 0;

  // Asks to be kicked for the next request, then checks again: true when a
  // request arrived meanwhile and the caller must not sleep.
  virtual bool FinalCheckForRequests() = 0;

  // Whether a request is waiting, without taking it or asking to be kicked
  // (for polling).
  virtual bool HasRequests() = 0;
};

}  // namespace pvdisk::transport

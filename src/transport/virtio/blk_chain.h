// virtio-blk requests as chains of buffers, whatever ring layout carries the
// chain (the split virtqueue in this folder, the packed one in
// ../virtio_packed/). Both layouts describe a buffer by address, length and
// whether the device may write it; the request format on top is the same:
//
//   header (16 bytes, device-readable)
//   data: one buffer per data page (IN: device-writable), or for DISCARD and
//         WRITE_ZEROES one 16-byte range segment (device-readable)
//   status (1 byte, device-writable)
//
// This is the driver's half: building the chain. The device's half, reading
// one, is blk_decoder.h.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/ring_request.h"

namespace pvdisk::transport::virtio {

// One buffer of a chain, as either ring layout's descriptor gives it.
struct Buffer {
  uint64_t addr;  // byte offset into the queue's data area
  uint32_t len;
  bool device_writable;
};

// Buffers in the chain of a request: header, status, and its data segments
// or (DISCARD, WRITE_ZEROES) its one range segment.
uint32_t BlkChainLength(BlockOp op, uint32_t segment_count);

// Writes the header, the status byte (0xff: not answered yet) and, for a
// range request, the range segment into the request's first table page
// (`data_memory` is the driver's mapping of the data area), and sets `chain`
// to the request's buffers in order. Returns the status byte's offset in the
// data area. REQUIRES: table_page_count >= 1; a range request's num_sectors
// fits the range segment (<= kMaxDiscardSectors).
uint64_t EncodeBlkRequest(const RingRequest& request, uint8_t* data_memory,
                          std::vector<Buffer>* chain);

// The result a status byte reports: 0, -EOPNOTSUPP or -EIO.
int BlkResult(uint8_t status);

}  // namespace pvdisk::transport::virtio

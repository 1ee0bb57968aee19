// BlkDecoder: the device's half of the virtio-blk request format, shared by
// the split (this folder) and packed (../virtio_packed/) device rings. A ring
// copies a request's chain out of shared memory once into Buffers; this
// checks it and decodes it, as if a stranger wrote it:
//
// readable buffers before writable ones, all inside the data area, a 16-byte
// header alone in the first, a status byte in the last, data lengths in
// whole sectors, the sector range inside the disk, no writes to a read-only
// disk. pvdisk's stricter rules, which its own driver follows: every data
// buffer is 512-byte aligned in address and length; DISCARD and WRITE_ZEROES
// carry exactly one segment.
//
// It also writes what goes back into the data area (GET_ID's answer, the
// status byte). Data pages are reached only through the GrantMapper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/data_area.h"
#include "transport/device_ring.h"
#include "transport/grant_mapper.h"
#include "transport/virtio/blk_chain.h"
#include "transport/virtio/format.h"

namespace pvdisk::transport::virtio {

class BlkDecoder {
 public:
  // DeviceRequest::reply_offset when the request has no usable status byte.
  static constexpr uint64_t kNoStatus = UINT64_MAX;

  // `grants` must outlive the decoder.
  BlkDecoder(GrantMapper* grants, const DeviceLimits& limits);

  // Clears `out` for a new request answered under `id`: no status byte yet.
  static void Reset(uint64_t id, DeviceRequest* out);

  // Checks `chain` and decodes it into `out` (whose id the ring has set).
  // kValid, kInvalid, kUnsupported, or kAnswered for GET_ID, whose answer is
  // already written: the ring then puts the response with result 0.
  // out->reply_offset is set when the chain's shape is sound and it ends in
  // a status byte.
  TakeResult Decode(const std::vector<Buffer>& chain, DeviceRequest* out);

  // Writes `request`'s status byte for `result` (0, -EOPNOTSUPP, other
  // negative errno: IOERR), if it has one. Returns the bytes the device
  // wrote into the chain: a successful read's data or GET_ID's answer, and
  // the status byte.
  uint32_t WriteStatus(const DeviceRequest& request, int result);

  // Whether [addr, addr + len) lies inside the data area.
  bool InsideData(uint64_t addr, uint64_t len) const;
  // Copies `len` bytes at data offset `addr` into `to` (or from `from`),
  // mapping the pages through the grants. False if mapping failed.
  // REQUIRES: InsideData(addr, len).
  bool CopyFromData(uint64_t addr, void* to, size_t len);
  bool CopyToData(uint64_t addr, const void* from, size_t len);

  const DeviceLimits& limits() const { return limits_; }

 private:
  TakeResult DecodeData(const std::vector<Buffer>& chain,
                        const BlkHeader& header, DeviceRequest* out);
  TakeResult DecodeRange(const std::vector<Buffer>& chain,
                         const BlkHeader& header, DeviceRequest* out);
  // The last byte of the chain's last buffer, if it can be a status byte.
  uint64_t StatusOffset(const std::vector<Buffer>& chain) const;
  TakeResult AnswerGetId(const std::vector<Buffer>& chain, DeviceRequest* out);

  DataArea area_;
  DeviceLimits limits_;
};

}  // namespace pvdisk::transport::virtio

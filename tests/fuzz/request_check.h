// The contract every device ring keeps towards the backend, whatever the
// frontend wrote: a request TakeRequest() calls kValid can be executed as
// it stands. The backend maps its pages and issues its I/O without looking
// again, so each property below is one the backend relies on.
#pragma once

#include <cstdint>

#include "fuzz_input.h"
#include "transport/device_ring.h"

namespace pvdisk::fuzz {

inline void CheckValidRequest(const transport::DeviceRequest& request,
                              const transport::DeviceLimits& limits) {
  using transport::BlockOp;
  bool in_disk = request.sector <= limits.disk_sectors &&
                 request.num_sectors <= limits.disk_sectors - request.sector;
  switch (request.op) {
    case BlockOp::kRead:
    case BlockOp::kWrite: {
      FUZZ_CHECK(!(request.op == BlockOp::kWrite && limits.read_only),
                 "a write to a read-only disk was valid");
      FUZZ_CHECK(!request.segments.empty(), "a data request without data");
      FUZZ_CHECK(request.segments.size() <= limits.max_segments,
                 "more segments than negotiated");
      uint64_t sectors = 0;
      for (const transport::DataSegment& segment : request.segments) {
        FUZZ_CHECK(segment.page < limits.data_pages,
                   "a segment outside the data area");
        FUZZ_CHECK(segment.first_sector <= segment.last_sector &&
                       segment.last_sector < 8,
                   "a segment's sectors are not inside its page");
        sectors += segment.last_sector - segment.first_sector + 1u;
      }
      FUZZ_CHECK(sectors == request.num_sectors,
                 "num_sectors is not the segments' sum");
      FUZZ_CHECK(in_disk, "a data request past the end of the disk");
      break;
    }
    case BlockOp::kFlush:
      FUZZ_CHECK(request.segments.empty() && request.num_sectors == 0,
                 "a flush with data");
      break;
    case BlockOp::kDiscard:
    case BlockOp::kWriteZeroes:
      FUZZ_CHECK(!limits.read_only, "a discard on a read-only disk was valid");
      FUZZ_CHECK(request.segments.empty(), "a discard with data segments");
      FUZZ_CHECK(request.num_sectors > 0, "an empty discard");
      FUZZ_CHECK(in_disk, "a discard past the end of the disk");
      break;
    default:
      FUZZ_CHECK(false, "an operation the backend does not know");
  }
}

}  // namespace pvdisk::fuzz

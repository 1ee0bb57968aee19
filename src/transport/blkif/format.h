// The blkif wire format: the shared ring header, request and response slots,
// exactly as Xen's io/ring.h and io/blkif.h lay them out on x86_64 (see
// reference/protocols.md §1-2 and docs/ring_format.md). Plain structs only;
// the rules that use them live in blkif_driver_ring.* and blkif_device_ring.*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvdisk::transport::blkif {

inline constexpr uint32_t kPageSize = 4096;
inline constexpr uint32_t kSectorSize = 512;
inline constexpr uint32_t kSectorsPerPage = kPageSize / kSectorSize;

// Operations (blkif.h). pvdisk does not implement WRITE_BARRIER; the backend
// answers it with kRspEopnotsupp.
inline constexpr uint8_t kOpRead = 0;
inline constexpr uint8_t kOpWrite = 1;
inline constexpr uint8_t kOpWriteBarrier = 2;
inline constexpr uint8_t kOpFlushDiskCache = 3;
inline constexpr uint8_t kOpDiscard = 5;
inline constexpr uint8_t kOpIndirect = 6;

// Discard flags. kDiscardSecure is Xen's; kDiscardZeroes is a pvdisk
// extension (blkif has no WRITE_ZEROES): the range must read as zeros
// afterwards and stay allocated (FALLOC_FL_ZERO_RANGE).
inline constexpr uint8_t kDiscardSecure = 1;
inline constexpr uint8_t kDiscardZeroes = 2;

// Segments a direct request can carry (BLKIF_MAX_SEGMENTS_PER_REQUEST).
inline constexpr int kMaxDirectSegments = 11;
// Indirect requests: the segments live in separate "indirect" pages of 512
// segments each, at most 8 of them (BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST).
inline constexpr int kSegmentsPerIndirectPage = 512;
inline constexpr int kMaxIndirectPages = 8;
inline constexpr int kMaxIndirectSegments =
    kSegmentsPerIndirectPage * kMaxIndirectPages;  // 4096

// Response status.
inline constexpr int16_t kRspOkay = 0;
inline constexpr int16_t kRspError = -1;
inline constexpr int16_t kRspEopnotsupp = -2;

// One data segment: 512-byte sectors first_sect..last_sect (inclusive, 0..7)
// of data page `gref`.
struct Segment {
  uint32_t gref;
  uint8_t first_sect;
  uint8_t last_sect;
  uint16_t pad;
};
static_assert(sizeof(Segment) == 8);

// READ, WRITE and FLUSH_DISKCACHE (nr_segments = 0).
struct Request {
  uint8_t operation;
  uint8_t nr_segments;
  uint16_t handle;
  uint32_t pad;
  uint64_t id;
  uint64_t sector_number;
  Segment seg[kMaxDirectSegments];
};
static_assert(sizeof(Request) == 112);
static_assert(offsetof(Request, id) == 8);
static_assert(offsetof(Request, sector_number) == 16);
static_assert(offsetof(Request, seg) == 24);

// DISCARD: nr_sectors sectors from sector_number.
struct DiscardRequest {
  uint8_t operation;
  uint8_t flag;
  uint16_t handle;
  uint32_t pad;
  uint64_t id;
  uint64_t sector_number;
  uint64_t nr_sectors;
};
static_assert(sizeof(DiscardRequest) == 32);
static_assert(offsetof(DiscardRequest, id) == offsetof(Request, id));

// INDIRECT: nr_segments segments of a READ or WRITE (indirect_op), listed in
// the indirect pages indirect_grefs[0 .. ceil(nr_segments / 512) - 1].
struct IndirectRequest {
  uint8_t operation;
  uint8_t indirect_op;
  uint16_t nr_segments;
  uint32_t pad;
  uint64_t id;
  uint64_t sector_number;
  uint16_t handle;
  uint16_t pad2;
  uint32_t indirect_grefs[kMaxIndirectPages];
};
static_assert(sizeof(IndirectRequest) == 64);
static_assert(offsetof(IndirectRequest, id) == offsetof(Request, id));
static_assert(offsetof(IndirectRequest, indirect_grefs) == 28);

struct Response {
  uint64_t id;
  uint8_t operation;
  uint8_t pad;
  int16_t status;
  uint32_t pad2;
};
static_assert(sizeof(Response) == 16);

// A slot holds a request until the backend consumed it, then a response.
union Slot {
  Request req;
  DiscardRequest discard;
  IndirectRequest indirect;
  Response rsp;
};
static_assert(sizeof(Slot) == 112);

// The shared ring header; slots follow at offset 64. Indices are free-running
// 32-bit counters (mask with size - 1 to get a slot).
struct SharedRingHeader {
  uint32_t req_prod;
  uint32_t req_event;
  uint32_t rsp_prod;
  uint32_t rsp_event;
  uint8_t pad[48];
};
static_assert(sizeof(SharedRingHeader) == 64);

// Bytes of shared memory a ring of `slots` slots needs, rounded up to pages.
constexpr size_t RingBytes(uint32_t slots) {
  size_t bytes = sizeof(SharedRingHeader) + size_t{slots} * sizeof(Slot);
  return (bytes + kPageSize - 1) / kPageSize * kPageSize;
}

}  // namespace pvdisk::transport::blkif

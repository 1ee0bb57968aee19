// The virtio split virtqueue and virtio-blk request format (virtio 1.x
// spec, "Split Virtqueues" and "Block Device"; reference/protocols.md §3).
// Plain structs and the layout of one queue's ring memory; the rules live in
// driver_ring.* and device_ring.*.
//
// Addresses: a descriptor's `addr` is a byte offset into the queue's data
// area (what a guest physical address is to a real device), never a
// pointer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvdisk::transport::virtio {

inline constexpr uint32_t kPageSize = 4096;
inline constexpr uint32_t kMaxQueueSize = 32768;

// Descriptor flags.
inline constexpr uint16_t kDescNext = 1;
inline constexpr uint16_t kDescWrite = 2;  // device-writable
inline constexpr uint16_t kDescIndirect = 4;

// Suppression flags (used without VIRTIO_RING_F_EVENT_IDX).
inline constexpr uint16_t kAvailNoInterrupt = 1;  // driver: "no used irqs"
inline constexpr uint16_t kUsedNoNotify = 1;      // device: "no kicks"

struct Desc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags;
  uint16_t next;
};
static_assert(sizeof(Desc) == 16);

struct UsedElem {
  uint32_t id;   // head of the chain
  uint32_t len;  // bytes the device wrote into the chain
};
static_assert(sizeof(UsedElem) == 8);

// virtio-blk request types and status values.
inline constexpr uint32_t kTypeIn = 0;
inline constexpr uint32_t kTypeOut = 1;
inline constexpr uint32_t kTypeFlush = 4;
inline constexpr uint32_t kTypeGetId = 8;
inline constexpr uint32_t kTypeDiscard = 11;
inline constexpr uint32_t kTypeWriteZeroes = 13;

inline constexpr uint8_t kStatusOk = 0;
inline constexpr uint8_t kStatusIoErr = 1;
inline constexpr uint8_t kStatusUnsupp = 2;

inline constexpr uint32_t kIdBytes = 20;  // GET_ID's answer

struct BlkHeader {
  uint32_t type;
  uint32_t reserved;
  uint64_t sector;
};
static_assert(sizeof(BlkHeader) == 16);

// DISCARD / WRITE_ZEROES data: one or more of these (pvdisk advertises
// max_discard_seg = max_write_zeroes_seg = 1).
struct DiscardSegment {
  uint64_t sector;
  uint32_t num_sectors;
  uint32_t flags;
};
static_assert(sizeof(DiscardSegment) == 16);
inline constexpr uint32_t kWriteZeroesUnmap = 1;
// What pvdisk's device advertises as max_discard_sectors and
// max_write_zeroes_sectors: as much as num_sectors holds, rounded down to a
// whole 4 KiB page so that the pieces of a long aligned range stay aligned.
inline constexpr uint32_t kMaxDiscardSectors = 0xFFFFFFF8u;
inline constexpr uint32_t kMaxWriteZeroesSectors = 0xFFFFFFF8u;

// Where the parts of a queue of `size` entries live in its ring memory:
// descriptor table at 0 (16-byte aligned), available ring right after it
// (2-byte aligned), used ring on the next page (4-byte aligned; a page of
// its own keeps the device's writes off the driver's cache lines).
struct RingLayout {
  size_t desc;
  size_t avail;  // flags, idx, ring[size], used_event
  size_t used;   // flags, idx, ring[size], avail_event
  size_t bytes;  // total, a multiple of kPageSize
};

constexpr size_t RoundUpToPage(size_t bytes) {
  return (bytes + kPageSize - 1) / kPageSize * kPageSize;
}

constexpr RingLayout LayoutFor(uint32_t size) {
  RingLayout layout{};
  layout.desc = 0;
  layout.avail = size_t{16} * size;
  layout.used = RoundUpToPage(layout.avail + 6 + size_t{2} * size);
  layout.bytes = RoundUpToPage(layout.used + 6 + size_t{8} * size);
  return layout;
}

// The event-index rule (vring_need_event): notify iff the new index passed
// `event`, i.e. event lies in [old, new) modulo 2^16.
constexpr bool NeedEvent(uint16_t event, uint16_t new_idx, uint16_t old_idx) {
  return static_cast<uint16_t>(new_idx - event - 1) <
         static_cast<uint16_t>(new_idx - old_idx);
}

// Where a request id's table pages hold its header, status byte, discard
// segment and indirect descriptor table (driver side).
inline constexpr size_t kHeaderOffset = 0;
inline constexpr size_t kStatusOffset = 16;
inline constexpr size_t kDiscardOffset = 32;
inline constexpr size_t kIndirectTableOffset = 64;

// Table pages per request id for requests of up to `max_segments` data
// descriptors (plus header and status) in an indirect table.
constexpr uint32_t TablePagesPerRequest(uint32_t max_segments) {
  return static_cast<uint32_t>((kIndirectTableOffset +
                                (size_t{max_segments} + 2) * sizeof(Desc) +
                                kPageSize - 1) /
                               kPageSize);
}

}  // namespace pvdisk::transport::virtio

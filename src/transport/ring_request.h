// The protocol-neutral forms of a request on the two sides of a ring:
// RingRequest is what a frontend queue asks a DriverRing to encode;
// DeviceRequest is what a DeviceRing decoded and validated for the backend.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "transport/block_io.h"

namespace pvdisk::stats {
class QueueStats;
}  // namespace pvdisk::stats

namespace pvdisk::transport {

// Sectors first_sector..last_sector (inclusive, 0..7) of data page `page`.
struct DataSegment {
  uint32_t page;
  uint8_t first_sector;
  uint8_t last_sector;
};

// How a producer decides to notify its peer.
enum class NotifyMode {
  kEventIdx,  // only when the peer asked (event index in the pushed window)
  kAlways,    // after every push that published something
};

// How the NVMe frontend's driver describes a request's data (--nvme-data):
// PRP entries (one page each, a list beyond two) or SGL descriptors.
enum class DataPointerMode { kPrp, kSgl };

// Interrupt coalescing on the device side (--irq-coalesce, NVMe's feature
// 08h): the interrupt for new responses waits until `threshold` of them are
// pending or `time_us` passed since the first; threshold 0 is off.
struct IrqCoalesce {
  uint32_t threshold = 0;
  uint32_t time_us = 0;
};

// What a protocol's rings are built with besides their memory. Implicitly
// made from a NotifyMode, the only setting the ring protocols share.
struct RingConfig {
  RingConfig(NotifyMode mode = NotifyMode::kEventIdx)  // NOLINT: implicit
      : notify(mode) {}
  NotifyMode notify;
  DataPointerMode data_pointer = DataPointerMode::kPrp;  // nvme's driver
  IrqCoalesce coalesce;                                  // nvme's device
  // Device side: where a ring counts what the backend loop cannot see
  // (irqs_coalesced). May be null.
  stats::QueueStats* stats = nullptr;
};

struct RingRequest {
  BlockOp op = BlockOp::kRead;
  uint64_t id = 0;  // echoed in the response; indexes the queue's shadow table
  uint64_t sector = 0;
  // kDiscard/kWriteZeroes: the length. kRead/kWrite: the sum of the segments.
  uint64_t num_sectors = 0;
  const DataSegment* segments = nullptr;  // kRead/kWrite only
  uint32_t segment_count = 0;
  // Pages reserved for this request (by id) where the protocol may write a
  // segment table that does not fit in the slot: blkif's indirect pages.
  const uint32_t* table_pages = nullptr;
  uint32_t table_page_count = 0;
};

// Outcome of publishing a batch of requests or responses.
enum class PushResult {
  kNothing,     // nothing new to publish
  kSuppressed,  // published; the peer did not ask to be notified
  kNotify,      // published; the peer must be notified
};

struct DeviceRequest {
  uint64_t id = 0;
  uint8_t wire_op = 0;  // the protocol's operation code, echoed in the response
  bool indirect = false;  // its segments came from out-of-slot tables
  BlockOp op = BlockOp::kRead;
  uint64_t sector = 0;
  uint64_t num_sectors = 0;
  // kRead/kWrite: the validated segments, in order.
  std::vector<DataSegment> segments;
  // Protocol-private bookkeeping for the response (virtio: where the status
  // byte goes, as a byte offset into the data area). Opaque to the backend.
  uint64_t reply_offset = 0;
};

// What DeviceRing::TakeRequest found.
enum class TakeResult {
  kNone,         // no request waiting
  kValid,        // a valid request: do it
  kInvalid,      // malformed: answer with an error, count invalid_reqs
  kUnsupported,  // well-formed but not implemented: answer "not supported"
  kAnswered,     // handled by the ring itself (e.g. GET_ID); response put
  kRingBroken,   // the producer index is impossible; stop consuming
};

}  // namespace pvdisk::transport

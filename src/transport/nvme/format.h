// NVMe I/O queue pairs as pvdisk lays them out in a queue's shared memory
// (NVM Express Base and NVM Command Set specifications: submission and
// completion queue entries, PRP and SGL data pointers, the Read, Write,
// Flush, Write Zeroes and Dataset Management commands, the generic and
// media status codes; Doorbell Buffer Config's shadow doorbells with
// EventIdx). Plain structs, constants, the memory layout and the
// notification rule; driver_ring.*, device_ring.*, prp.* and sgl.* hold the
// rules.
//
// Addresses in commands (PRP entries, SGL descriptors) are byte offsets into
// the queue's data area, as a device's are physical addresses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvdisk::transport::nvme {

inline constexpr uint32_t kPageSize = 4096;  // CC.MPS = 0
inline constexpr uint32_t kLbaBytes = 512;   // the namespace's LBA format
inline constexpr uint32_t kMaxQueueSize = 4096;
// The one namespace; Flush also accepts "all namespaces".
inline constexpr uint32_t kNamespaceId = 1;
inline constexpr uint32_t kAllNamespaces = 0xFFFFFFFFu;

// I/O command opcodes.
inline constexpr uint8_t kOpFlush = 0x00;
inline constexpr uint8_t kOpWrite = 0x01;
inline constexpr uint8_t kOpRead = 0x02;
inline constexpr uint8_t kOpWriteZeroes = 0x08;
inline constexpr uint8_t kOpDatasetManagement = 0x09;

// Command dword 0's flags byte: FUSE (bits 0-1, fused operations: not
// supported) and PSDT (bits 6-7: 0 = PRPs, 1 = SGLs, the rest refused).
inline constexpr uint8_t kFlagsFuseMask = 0x03;
inline constexpr uint8_t kFlagsPsdtMask = 0xC0;
inline constexpr uint8_t kPsdtPrp = 0x00;
inline constexpr uint8_t kPsdtSgl = 0x40;

// Submission queue entry: the common layout with the read/write fields
// (slba in cdw10-11, 0's based block count in cdw12's low 16 bits).
struct Command {
  uint8_t opcode;
  uint8_t flags;
  uint16_t command_id;
  uint32_t nsid;
  uint32_t cdw2;
  uint32_t cdw3;
  uint64_t metadata;
  uint64_t dptr[2];  // PRP1, PRP2 or one SGL descriptor (SGL1)
  uint32_t cdw10;
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
};
static_assert(sizeof(Command) == 64);
static_assert(offsetof(Command, dptr) == 24 && offsetof(Command, cdw10) == 40);

// cdw12 of Read, Write and Write Zeroes: NLB (0's based) in bits 0-15;
// Write Zeroes' DEAC (deallocate) is bit 25. pvdisk refuses every other
// bit (FUA, limited retry, protection information: not offered).
inline constexpr uint32_t kCdw12NlbMask = 0xFFFF;
inline constexpr uint32_t kCdw12Deallocate = 1u << 25;
inline constexpr uint32_t kMaxBlocksPerCommand = 0x10000;
// Dataset Management: cdw10 NR (0's based ranges) in bits 0-7, cdw11's AD
// (deallocate) is bit 2. pvdisk takes one range per command.
inline constexpr uint32_t kDsmAttributeDeallocate = 1u << 2;
struct DsmRange {
  uint32_t attributes;
  uint32_t num_blocks;  // not 0's based
  uint64_t slba;
};
static_assert(sizeof(DsmRange) == 16);

// Completion queue entry. status: bit 0 the phase tag, bits 1-8 the status
// code, 9-11 the status code type.
struct Completion {
  uint32_t result;
  uint32_t reserved;
  uint16_t sq_head;
  uint16_t sq_id;
  uint16_t command_id;
  uint16_t status;
};
static_assert(sizeof(Completion) == 16);

// Status values as (type << 8) | code, the form a driver tests; the
// completion's status field holds them shifted left by one above the phase.
inline constexpr uint16_t kScSuccess = 0x000;
inline constexpr uint16_t kScInvalidOpcode = 0x001;
inline constexpr uint16_t kScInvalidField = 0x002;
inline constexpr uint16_t kScCommandIdConflict = 0x003;
inline constexpr uint16_t kScDataTransferError = 0x004;
inline constexpr uint16_t kScInternalError = 0x006;
inline constexpr uint16_t kScInvalidNamespace = 0x00B;
inline constexpr uint16_t kScSglInvalidSegment = 0x00D;
inline constexpr uint16_t kScSglInvalidCount = 0x00E;
inline constexpr uint16_t kScSglInvalidDataLength = 0x00F;
inline constexpr uint16_t kScSglInvalidType = 0x011;
inline constexpr uint16_t kScPrpInvalidOffset = 0x013;
inline constexpr uint16_t kScLbaOutOfRange = 0x080;
inline constexpr uint16_t kScWriteFault = 0x280;
inline constexpr uint16_t kScUnrecoveredReadError = 0x281;
inline constexpr uint16_t kScReadOnly = 0x282;

constexpr uint16_t StatusField(uint16_t status, bool phase) {
  return static_cast<uint16_t>((status << 1) | (phase ? 1 : 0));
}
constexpr uint16_t StatusOf(uint16_t field) {
  return static_cast<uint16_t>((field >> 1) & 0x7FF);
}

// SGL descriptor: type in the identifier's high nibble, subtype (0:
// address) in the low one.
struct SglDescriptor {
  uint64_t addr;
  uint32_t length;
  uint8_t reserved[3];
  uint8_t id;
};
static_assert(sizeof(SglDescriptor) == 16);
inline constexpr uint8_t kSglDataBlock = 0x00;
inline constexpr uint8_t kSglSegment = 0x20;
inline constexpr uint8_t kSglLastSegment = 0x30;
inline constexpr uint32_t kSglPerPage = kPageSize / sizeof(SglDescriptor);
inline constexpr uint32_t kPrpPerPage = kPageSize / sizeof(uint64_t);

// The doorbells. Under --notify always they are plain doorbells: the
// driver stores a new value and always kicks. Under event-idx they are the
// shadow doorbells of Doorbell Buffer Config: the driver stores the value
// and kicks only if the device's EventIdx lies in what it just published.
// The interrupt direction has no doorbell in NVMe; pvdisk adds the same
// rule there: the driver's CQ EventIdx names the completion position at
// which it wants the next interrupt (as virtio's used_event).
struct Doorbells {
  // Written by the driver.
  uint32_t sq_tail;  // next SQ entry the driver will fill, 0 .. size - 1
  uint32_t pad0[15];
  uint32_t cq_head;  // next CQ entry the driver will consume
  uint32_t pad1[15];
  uint32_t cq_event;  // interrupt when the CQ tail passes this
  uint32_t pad2[15];
  // Written by the device.
  uint32_t sq_event;  // kick when the SQ tail passes this
  uint32_t pad3[15];
};
static_assert(sizeof(Doorbells) == 256);

constexpr size_t RoundUpToPage(size_t bytes) {
  return (bytes + kPageSize - 1) / kPageSize * kPageSize;
}

// Where a queue pair of `size` entries lives in its ring memory: the SQ at
// 0, the CQ on the next page, the doorbells on a page of their own.
struct RingLayout {
  size_t sq;
  size_t cq;
  size_t doorbells;
  size_t bytes;  // total, a multiple of kPageSize
};

constexpr RingLayout LayoutFor(uint32_t size) {
  RingLayout layout{};
  layout.sq = 0;
  layout.cq = RoundUpToPage(size_t{sizeof(Command)} * size);
  layout.doorbells = RoundUpToPage(layout.cq + sizeof(Completion) * size);
  layout.bytes = layout.doorbells + kPageSize;
  return layout;
}

// The EventIdx rule (virtio's vring_need_event, the test Linux's driver
// uses for shadow doorbells) on positions modulo the queue size: a
// producer that moved from `old_pos` to `new_pos` notifies iff `event`
// lies in [old_pos, new_pos). A whole lap or more always notifies.
constexpr bool NeedEvent(uint32_t event, uint32_t new_pos, uint32_t old_pos,
                         uint32_t size) {
  const uint32_t mask = size - 1;
  if (new_pos - old_pos >= size) return true;
  return ((new_pos - event - 1) & mask) < ((new_pos - old_pos) & mask);
}

// Pages each request id owns for its PRP list or SGL segments and its
// Dataset Management range: a chain of pages, each holding
// kSglPerPage - 1 data descriptors and a link (the SGL's case, which needs
// more than a PRP list's kPrpPerPage - 1).
constexpr uint32_t TablePagesPerRequest(uint32_t max_segments) {
  const uint32_t per_page = kSglPerPage - 1;
  const uint32_t pages = (max_segments + per_page - 1) / per_page;
  return pages == 0 ? 1 : pages;
}

}  // namespace pvdisk::transport::nvme

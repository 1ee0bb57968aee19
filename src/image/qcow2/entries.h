// The entries of qcow2's tables: L1 entries (where an L2 table is), L2
// entries (where a data cluster is, or that it reads as zeros, is not
// allocated, or is compressed) and refcount table entries (where a refcount
// block is); and the refcounts packed in a refcount block. Pure decoding:
// whether an offset is inside the file and clear of other metadata is the
// layout's business (layout.h).
#pragma once

#include <cstdint>
#include <span>

namespace pvdisk::image::qcow2 {

// Bits 9..55: a cluster-aligned host offset (L1, L2 and refcount tables).
inline constexpr uint64_t kOffsetMask = 0x00fffffffffffe00ull;
// Bit 63 of L1 and standard L2 entries: the refcount is exactly 1, so the
// table or cluster may be written in place.
inline constexpr uint64_t kCopied = 1ull << 63;
inline constexpr uint64_t kL1Reserved = 0x7f000000000001ffull;
inline constexpr uint64_t kL2Compressed = 1ull << 62;
// Bit 0 of a standard L2 entry (version 3): the cluster reads as zeros.
inline constexpr uint64_t kL2Zero = 1ull;
inline constexpr uint64_t kL2Reserved = 0x3f000000000001feull;
inline constexpr uint64_t kRefcountTableReserved = 0x1ffull;

enum class L2Kind {
  kUnallocated,  // offset 0, no zero flag: the backing file, or zeros
  kZero,         // zero flag: zeros (a preallocated cluster may be named)
  kData,         // the data is at the host offset
  kCompressed,   // the data is compressed (compressed.h)
};

struct L2Entry {
  L2Kind kind = L2Kind::kUnallocated;
  uint64_t host_offset = 0;  // cluster-aligned; 0 when none
  bool copied = false;
  bool reserved_bits = false;  // set reserved bits: the entry is invalid
};

// Decodes a standard (64-bit) L2 entry, or the first word of an extended
// one (subclusters.h); version 2 and extended entries have no zero flag,
// so bit 0 is a reserved bit there.
L2Entry DecodeL2Entry(uint64_t raw, uint32_t version, bool extended = false);
inline uint64_t EncodeL2Data(uint64_t host_offset) {
  return (host_offset & kOffsetMask) | kCopied;
}

// Refcount `index` of a refcount block whose refcounts are 2^order bits
// wide (sub-byte widths are packed from the least significant bit; 8 bits
// and more are big-endian). The caller keeps index below the block's count.
uint64_t GetRefcount(std::span<const uint8_t> block, uint64_t index,
                     uint32_t order);
void SetRefcount(std::span<uint8_t> block, uint64_t index, uint32_t order,
                 uint64_t value);
// The largest refcount an order can hold.
inline uint64_t MaxRefcount(uint32_t order) {
  return order >= 6 ? ~0ull : (1ull << (1u << order)) - 1;
}
// The bytes of the block that hold refcount `index`: {first, count}.
struct ByteRange {
  uint64_t offset;
  uint64_t length;
};
ByteRange RefcountBytes(uint64_t index, uint32_t order);

}  // namespace pvdisk::image::qcow2

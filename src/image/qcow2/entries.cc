#include "image/qcow2/entries.h"

#include "image/qcow2/endian.h"

namespace pvdisk::image::qcow2 {

L2Entry DecodeL2Entry(uint64_t raw, uint32_t version, bool extended) {
  L2Entry e;
  e.copied = (raw & kCopied) != 0;
  if (raw & kL2Compressed) {
    e.kind = L2Kind::kCompressed;
    return e;
  }
  const bool zero_flag = version >= 3 && !extended;
  const uint64_t reserved = zero_flag ? kL2Reserved : (kL2Reserved | kL2Zero);
  e.reserved_bits = (raw & reserved) != 0;
  e.host_offset = raw & kOffsetMask;
  if (zero_flag && (raw & kL2Zero)) {
    e.kind = L2Kind::kZero;
  } else if (e.host_offset != 0) {
    e.kind = L2Kind::kData;
  } else {
    e.kind = L2Kind::kUnallocated;
  }
  return e;
}

uint64_t GetRefcount(std::span<const uint8_t> block, uint64_t index,
                     uint32_t order) {
  const uint8_t* p = block.data();
  switch (order) {
    case 0:
      return (p[index / 8] >> (index % 8)) & 0x1;
    case 1:
      return (p[index / 4] >> (2 * (index % 4))) & 0x3;
    case 2:
      return (p[index / 2] >> (4 * (index % 2))) & 0xf;
    case 3:
      return p[index];
    case 4:
      return LoadBe16(p + 2 * index);
    case 5:
      return LoadBe32(p + 4 * index);
    default:
      return LoadBe64(p + 8 * index);
  }
}

void SetRefcount(std::span<uint8_t> block, uint64_t index, uint32_t order,
                 uint64_t value) {
  uint8_t* p = block.data();
  if (order < 3) {
    const uint32_t bits = 1u << order;
    const uint32_t per_byte = 8 / bits;
    const uint32_t shift = bits * (index % per_byte);
    const uint8_t mask = static_cast<uint8_t>(((1u << bits) - 1) << shift);
    uint8_t& byte = p[index / per_byte];
    byte = static_cast<uint8_t>((byte & ~mask) | ((value << shift) & mask));
    return;
  }
  switch (order) {
    case 3:
      p[index] = static_cast<uint8_t>(value);
      return;
    case 4:
      StoreBe16(p + 2 * index, static_cast<uint16_t>(value));
      return;
    case 5:
      StoreBe32(p + 4 * index, static_cast<uint32_t>(value));
      return;
    default:
      StoreBe64(p + 8 * index, value);
  }
}

ByteRange RefcountBytes(uint64_t index, uint32_t order) {
  if (order < 3) return {index / (8u >> order), 1};
  const uint64_t width = 1u << (order - 3);
  return {index * width, width};
}

}  // namespace pvdisk::image::qcow2

// Extended L2 entries (incompatible feature bit 4): each L2 entry is 128
// bits, the standard 64-bit entry (entries.h; its bit 0, the zero flag, is
// reserved) and a 64-bit bitmap that divides the cluster into 32
// subclusters of cluster_size / 32 bytes:
//   bits 0..31   allocated: subcluster i is read from the host cluster at
//                offset i * subcluster size;
//   bits 32..63  reads as zeros: subcluster i - 32 reads as zeros;
//   neither bit: the subcluster is unallocated and reads from the backing
//                file (zeros without one).
// Valid entries: no subcluster both allocated and zero; allocated bits only
// when the entry names a host cluster; a compressed entry's bitmap is 0
// (compressed clusters have no subclusters). Anything else is a fault of
// that cluster's range (EIO there), never of the image.
//
// Pure decoding and bit arithmetic, no I/O.
#pragma once

#include <cstdint>

#include "image/qcow2/entries.h"

namespace pvdisk::image::qcow2 {

inline constexpr uint32_t kSubclusters = 32;

struct SubclusterBitmap {
  uint32_t allocated = 0;
  uint32_t zero = 0;
};

inline SubclusterBitmap DecodeSubclusterBitmap(uint64_t raw) {
  return {static_cast<uint32_t>(raw), static_cast<uint32_t>(raw >> 32)};
}
inline uint64_t EncodeSubclusterBitmap(SubclusterBitmap b) {
  return uint64_t{b.allocated} | (uint64_t{b.zero} << 32);
}

// Subclusters [first, end) as a mask (end <= 32).
inline uint32_t SubclusterMask(uint32_t first, uint32_t end) {
  const uint64_t upto = end >= 32 ? ~uint64_t{0} : (uint64_t{1} << end) - 1;
  return static_cast<uint32_t>(upto & ~((uint64_t{1} << first) - 1));
}

// Why an extended entry is invalid; nullptr when it is valid. `entry` is
// the decoded first word, `raw_entry` its bits (for the compressed flag).
const char* SubclusterFault(uint64_t raw_entry, const L2Entry& entry,
                            uint64_t raw_bitmap);

// What subcluster `index` reads as (kData: the host cluster; kZero;
// kUnallocated), and how many subclusters from `index` on read the same
// way (at least 1).
struct SubclusterRun {
  L2Kind kind = L2Kind::kUnallocated;
  uint32_t count = 1;
};
SubclusterRun SubclusterRunAt(SubclusterBitmap bitmap, uint32_t index);

}  // namespace pvdisk::image::qcow2

// The feature bits of a qcow2 v3 header and what pvdisk does with each.
//
// Incompatible features (a reader that does not know one must refuse):
//   bit 0 dirty            refcounts may be stale (lazy refcounts, unclean
//                          close): accepted for reading; before writing
//                          the refcounts are rebuilt (refcount_rebuild.h:
//                          the allocator trusts them) and the bit cleared;
//   bit 1 corrupt          refused: QEMU marked the metadata inconsistent;
//   bit 2 external data    refused: data lives in another file;
//   bit 3 compression type accepted: the type only matters to compressed
//                          clusters, which pvdisk does not read (mapping.h);
//   bit 4 extended L2      accepted: 16-byte L2 entries with a bitmap of
//                          32 subclusters (subclusters.h);
//   any other bit          refused.
// Compatible features: bit 0 lazy refcounts (accepted; pvdisk keeps its
// refcounts exact, which is always allowed). Unknown compatible bits are
// ignored, as the spec says.
// Autoclear features: a writer that does not understand a bit must clear
// it before the first write; pvdisk clears every autoclear bit when it opens
// an image for writing (bit 0 bitmaps, bit 1 raw external data).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

inline constexpr uint64_t kIncompatDirty = 1ull << 0;
inline constexpr uint64_t kIncompatCorrupt = 1ull << 1;
inline constexpr uint64_t kIncompatExternalData = 1ull << 2;
inline constexpr uint64_t kIncompatCompressionType = 1ull << 3;
inline constexpr uint64_t kIncompatExtendedL2 = 1ull << 4;
inline constexpr uint64_t kCompatLazyRefcounts = 1ull << 0;
inline constexpr uint64_t kAutoclearBitmaps = 1ull << 0;
inline constexpr uint64_t kAutoclearRawExternalData = 1ull << 1;

// Every bit pvdisk can open an image with.
inline constexpr uint64_t kIncompatAccepted =
    kIncompatDirty | kIncompatCompressionType | kIncompatExtendedL2;

// "dirty", "corrupt", ..., or "unknown" for a bit the spec does not name.
const char* IncompatibleFeatureName(int bit);
const char* CompatibleFeatureName(int bit);
const char* AutoclearFeatureName(int bit);

// Refuses the first incompatible bit pvdisk does not support with one line
// naming it; `writable` also refuses the dirty bit. `image` names the file.
absl::Status CheckIncompatibleFeatures(uint64_t incompatible, bool writable,
                                       const std::string& image);

// The set bits of all three fields by name ("dirty, lazy refcounts"; an
// unnamed bit as "compatible bit 7").
std::string DescribeFeatures(uint64_t incompatible, uint64_t compatible,
                             uint64_t autoclear);

}  // namespace pvdisk::image::qcow2

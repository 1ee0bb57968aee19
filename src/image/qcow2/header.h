// The qcow2 header (QEMU's docs/interop/qcow2.rst, versions 2 and 3): its
// fields, the header extensions pvdisk reads, and the backing file name;
// parsed and checked from the first bytes of the file alone.
//
// What ParseQcow2Header accepts (everything else is refused with one line
// naming the field, its value and what is allowed):
// - magic "QFI\xfb", version 2 or 3;
// - cluster_bits 9..21 (512 B to 2 MiB clusters; 14..21 with extended L2
//   entries);
// - a virtual size that is a multiple of 512 and that the L1 table covers;
// - an L1 table of at most kMaxL1Entries entries, cluster-aligned;
// - a refcount table of 1..kMaxRefcountTableBytes, cluster-aligned;
// - refcount_order 0..6 (refcounts of 1 to 64 bits: all the spec defines;
//   version 2 is always order 4);
// - no encryption (crypt_method 0);
// - the incompatible features features.h lists as supported;
// - compression type 0 (zlib) or 1 (zstd), with incompatible bit 3 set
//   exactly when it is not 0;
// - header extensions inside the first cluster, each within bounds; the
//   backing format and the feature name table are read, others skipped;
// - a backing file name of 1..1023 bytes inside the first cluster, after
//   the header.
// Offsets are checked against the file's size, and metadata regions against
// each other, by CheckQcow2Layout (layout.h), which needs the file's size.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image/qcow2/features.h"

namespace pvdisk::image::qcow2 {

inline constexpr uint32_t kQcow2Magic = 0x514649fb;  // "QFI\xfb"
inline constexpr uint32_t kMinClusterBits = 9;       // 512 B
inline constexpr uint32_t kMaxClusterBits = 21;      // 2 MiB
// Extended L2 entries need clusters of at least 16 KiB (512-byte
// subclusters).
inline constexpr uint32_t kMinExtendedL2ClusterBits = 14;
inline constexpr uint32_t kMaxRefcountOrder = 6;  // 64-bit refcounts
// An L1 table of at most 32 MiB, and a refcount table of at most 8 MiB, as
// QEMU allows: larger ones are refused before anything is allocated.
inline constexpr uint32_t kMaxL1Entries = (32u << 20) / 8;
inline constexpr uint64_t kMaxRefcountTableBytes = 8u << 20;
inline constexpr uint32_t kMaxBackingNameBytes = 1023;
inline constexpr uint32_t kV2HeaderBytes = 72;
inline constexpr uint32_t kV3HeaderBytes = 104;

// Header extension types.
inline constexpr uint32_t kExtEnd = 0;
inline constexpr uint32_t kExtBackingFormat = 0xe2792aca;
inline constexpr uint32_t kExtFeatureNames = 0x6803f857;

struct FeatureName {
  uint8_t type = 0;  // 0 incompatible, 1 compatible, 2 autoclear
  uint8_t bit = 0;
  std::string name;
};

struct Qcow2Header {
  uint32_t version = 3;
  uint64_t backing_file_offset = 0;
  uint32_t backing_file_size = 0;
  uint32_t cluster_bits = 16;
  uint64_t size = 0;  // virtual size in bytes
  uint32_t crypt_method = 0;
  uint32_t l1_size = 0;  // entries
  uint64_t l1_table_offset = 0;
  uint64_t refcount_table_offset = 0;
  uint32_t refcount_table_clusters = 0;
  uint32_t nb_snapshots = 0;
  uint64_t snapshots_offset = 0;
  uint64_t incompatible_features = 0;
  uint64_t compatible_features = 0;
  uint64_t autoclear_features = 0;
  uint32_t refcount_order = 4;
  uint32_t header_length = kV3HeaderBytes;
  uint8_t compression_type = 0;

  std::string backing_file;    // empty: no backing file
  std::string backing_format;  // from the extension; empty if absent
  std::vector<FeatureName> feature_names;

  uint64_t cluster_size() const { return uint64_t{1} << cluster_bits; }
  // Extended L2 entries (incompatible bit 4; subclusters.h): 16 bytes an
  // entry, the standard 8 and a subcluster bitmap.
  bool extended_l2() const {
    return (incompatible_features & kIncompatExtendedL2) != 0;
  }
  uint64_t l2_entry_bytes() const { return extended_l2() ? 16 : 8; }
  // Entries of one L2 table.
  uint64_t l2_entries() const { return cluster_size() / l2_entry_bytes(); }
  // Virtual bytes one L2 table maps.
  uint64_t bytes_per_l2() const { return l2_entries() * cluster_size(); }
  uint32_t refcount_bits() const { return 1u << refcount_order; }
  // Refcounts one refcount block holds.
  uint64_t refcounts_per_block() const {
    return cluster_size() * 8 / refcount_bits();
  }
  uint64_t refcount_table_entries() const {
    return uint64_t{refcount_table_clusters} * cluster_size() / 8;
  }
};

// L1 entries needed to map `size` virtual bytes with `cluster_bits` (and
// 16-byte L2 entries when `extended_l2`).
uint64_t L1EntriesFor(uint64_t size, uint32_t cluster_bits,
                      bool extended_l2 = false);

// Parses and checks the header from the file's first bytes (at least the
// header; the extensions and backing file name must also lie inside
// `bytes`). Refusals are InvalidArgument, naming the field and what is
// allowed; `image` names the file in them.
absl::StatusOr<Qcow2Header> ParseQcow2Header(
    std::span<const uint8_t> bytes, const std::string& image = "image");

// The header as the first cluster of a new image: fields, a backing format
// extension when backing_format is set, the end marker, and the backing
// file name after them. The caller sets backing_file_offset/size to 0; this
// places the name and returns the cluster (header.cluster_size() bytes).
absl::StatusOr<std::vector<uint8_t>> EncodeQcow2Header(Qcow2Header header);

}  // namespace pvdisk::image::qcow2

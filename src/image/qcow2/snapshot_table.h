// The internal snapshot table of a qcow2 image (header fields nb_snapshots
// and snapshots_offset): one entry per snapshot, each naming the L1 table
// that maps the disk as it was when the snapshot was taken, with the
// snapshot's id, name, date, guest clock and saved VM state size, and in
// its extra data the disk's size at the time.
//
// Entry layout (big-endian, each entry padded to a multiple of 8 bytes):
//   0  L1 table offset (8)       8  L1 entries (4)
//   12 id length (2)             14 name length (2)
//   16 date, seconds (4)         20 date, nanoseconds (4)
//   24 guest clock, ns (8)       32 VM state size (4)
//   36 extra data length (4)     40 extra data, then id, then name
// Extra data: 64-bit VM state size (bytes 40-47), the disk size (48-55),
// the instruction count (56-63); fields the length does not cover are
// absent.
//
// Refused (InvalidArgument, one line naming the image and what is wrong):
// more than kMaxSnapshots entries, a table larger than kMaxSnapshotTableBytes
// or running past the end of the file or into other metadata, an entry
// whose extra data is longer than kMaxSnapshotExtraBytes. A snapshot whose
// own L1 table cannot be used (unaligned, past the end of the file, too
// large, too small for its disk size, or over other metadata) is listed
// with `problem` saying why; only serving that snapshot is refused.
//
// Parsing does no I/O; ReadSnapshotTable reads the bytes with pread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image/qcow2/header.h"
#include "image/qcow2/layout.h"

namespace pvdisk::image::qcow2 {

// QEMU's own bounds.
inline constexpr uint32_t kMaxSnapshots = 65536;
inline constexpr uint64_t kMaxSnapshotTableBytes = uint64_t{64} << 20;
inline constexpr uint32_t kMaxSnapshotExtraBytes = 1024;

struct Snapshot {
  std::string id;
  std::string name;
  uint64_t l1_table_offset = 0;
  uint32_t l1_size = 0;
  uint32_t date_sec = 0;
  uint32_t date_nsec = 0;
  uint64_t vm_clock_nsec = 0;
  uint64_t vm_state_size = 0;
  // The virtual disk's size when the snapshot was taken (the image's size
  // when the extra data does not say).
  uint64_t disk_size = 0;
  // Empty: the snapshot can be served. Else why not.
  std::string problem;
  // The bytes its entry takes in the table, padding included (the last
  // entry's padding only as far as the file goes).
  uint64_t entry_bytes = 0;
};

// Parses the table from `bytes`, which start at header.snapshots_offset
// and run to the end of the file (or kMaxSnapshotTableBytes, if sooner).
// `layout` (CheckQcow2Layout's) holds the rest of the metadata; the table
// may cover its own first region there. `file_size` bounds the L1 tables.
absl::StatusOr<std::vector<Snapshot>> ParseSnapshotTable(
    const Qcow2Header& header, std::span<const uint8_t> bytes,
    uint64_t file_size, const MetadataLayout& layout, const std::string& image);

// Reads and parses the table of the image open as `fd` (borrowed).
absl::StatusOr<std::vector<Snapshot>> ReadSnapshotTable(
    int fd, const Qcow2Header& header, uint64_t file_size,
    const MetadataLayout& layout, const std::string& image);

// The snapshot whose id or, failing that, name is `key`; NotFound with one
// line listing the snapshots there are; FailedPrecondition if it has a
// problem.
absl::StatusOr<Snapshot> FindSnapshot(const std::vector<Snapshot>& snapshots,
                                      const std::string& key,
                                      const std::string& image);

// `header` as it maps the snapshot's disk: its L1 table and its size.
Qcow2Header SnapshotHeader(const Qcow2Header& header, const Snapshot& s);

}  // namespace pvdisk::image::qcow2

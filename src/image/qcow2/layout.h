// MetadataLayout: where an image's metadata lies in its file (header
// cluster, L1 table, refcount table, refcount blocks, L2 tables, snapshot
// table), so that a table or data cluster an entry names can be checked
// against the file's size and against every other piece of metadata.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "image/qcow2/header.h"

namespace pvdisk::image::qcow2 {

enum class Region : uint8_t {
  kHeader,
  kL1Table,
  kRefcountTable,
  kRefcountBlock,
  kL2Table,
  kSnapshotTable,
};
const char* RegionName(Region region);

class MetadataLayout {
 public:
  // Adds [offset, offset + length); false (and nothing added) if it
  // overlaps a region already there or wraps around.
  bool Add(uint64_t offset, uint64_t length, Region region);
  // Removes the region that starts at `offset`, if any (a table no longer
  // in use, whose cluster may become data).
  void Remove(uint64_t offset) { regions_.erase(offset); }
  // The region that holds a byte of [offset, offset + length), if any.
  std::optional<Region> Overlap(uint64_t offset, uint64_t length) const;
  size_t regions() const { return regions_.size(); }

 private:
  struct Span {
    uint64_t end;
    Region region;
  };
  std::map<uint64_t, Span> regions_;  // by start offset; never overlapping
};

// Checks the regions the header names against the file's size and each
// other: the header cluster, the L1 table, the refcount table and the start
// of the snapshot table must lie inside the file and not overlap. Returns
// the layout of those regions; the tables' entries add theirs
// (metadata.h).
absl::StatusOr<MetadataLayout> CheckQcow2Layout(const Qcow2Header& header,
                                                uint64_t file_size,
                                                const std::string& image);

}  // namespace pvdisk::image::qcow2

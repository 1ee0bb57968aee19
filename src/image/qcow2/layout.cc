#include "image/qcow2/layout.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::image::qcow2 {

const char* RegionName(Region region) {
  switch (region) {
    case Region::kHeader:
      return "the header";
    case Region::kL1Table:
      return "the L1 table";
    case Region::kRefcountTable:
      return "the refcount table";
    case Region::kRefcountBlock:
      return "a refcount block";
    case Region::kL2Table:
      return "an L2 table";
    case Region::kSnapshotTable:
      return "the snapshot table";
  }
  return "metadata";
}

std::optional<Region> MetadataLayout::Overlap(uint64_t offset,
                                              uint64_t length) const {
  if (length == 0) return std::nullopt;
  const uint64_t end = offset + length < offset ? ~0ull : offset + length;
  auto it = regions_.lower_bound(end);  // first region starting at/after end
  if (it == regions_.begin()) return std::nullopt;
  --it;  // the last region starting before end
  if (it->second.end > offset) return it->second.region;
  return std::nullopt;
}

bool MetadataLayout::Add(uint64_t offset, uint64_t length, Region region) {
  if (length == 0 || offset + length < offset) return false;
  if (Overlap(offset, length).has_value()) return false;
  regions_.emplace(offset, Span{offset + length, region});
  return true;
}

absl::StatusOr<MetadataLayout> CheckQcow2Layout(const Qcow2Header& h,
                                                uint64_t file_size,
                                                const std::string& image) {
  const uint64_t cluster = h.cluster_size();
  MetadataLayout layout;
  auto place = [&](uint64_t offset, uint64_t length, Region region,
                   const char* field) -> absl::Status {
    if (offset > file_size || length > file_size - offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          image, ": qcow2 ", RegionName(region), " (", field, " ", offset, ", ",
          length, " bytes) runs past the end of the file (", file_size,
          " bytes)"));
    }
    if (std::optional<Region> other = layout.Overlap(offset, length)) {
      return absl::InvalidArgumentError(absl::StrCat(
          image, ": qcow2 ", RegionName(region), " (", field, " ", offset, ", ",
          length, " bytes) overlaps ", RegionName(*other)));
    }
    layout.Add(offset, length, region);
    return absl::OkStatus();
  };
  if (file_size < cluster) {
    return absl::InvalidArgumentError(absl::StrCat(
        image, ": qcow2 file of ", file_size,
        " bytes is shorter than its header cluster (", cluster, " bytes)"));
  }
  layout.Add(0, cluster, Region::kHeader);
  if (h.l1_size > 0) {
    // The table takes whole clusters: nothing else may share its last one.
    const uint64_t bytes = uint64_t{h.l1_size} * 8;
    if (absl::Status s = place(h.l1_table_offset, bytes, Region::kL1Table,
                               "l1_table_offset");
        !s.ok()) {
      return s;
    }
    const uint64_t rounded = (bytes + cluster - 1) / cluster * cluster;
    if (rounded > bytes) {
      const uint64_t tail = h.l1_table_offset + bytes;
      const uint64_t tail_length =
          std::min(rounded - bytes, file_size > tail ? file_size - tail : 0);
      if (tail_length > 0 && !layout.Add(tail, tail_length, Region::kL1Table)) {
        return absl::InvalidArgumentError(
            absl::StrCat(image,
                         ": qcow2 the L1 table's last cluster is "
                         "shared with other metadata"));
      }
    }
  }
  if (absl::Status s = place(h.refcount_table_offset,
                             uint64_t{h.refcount_table_clusters} * cluster,
                             Region::kRefcountTable, "refcount_table_offset");
      !s.ok()) {
    return s;
  }
  if (h.nb_snapshots > 0) {
    if (h.snapshots_offset >= file_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          image, ": qcow2 the snapshot table (snapshots_offset ",
          h.snapshots_offset, ") starts past the end of the file (", file_size,
          " bytes)"));
    }
    if (absl::Status s =
            place(h.snapshots_offset,
                  std::min(cluster, file_size - h.snapshots_offset),
                  Region::kSnapshotTable, "snapshots_offset");
        !s.ok()) {
      return s;
    }
  }
  return layout;
}

}  // namespace pvdisk::image::qcow2

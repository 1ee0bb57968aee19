#include "image/qcow2/snapshot_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/file_io.h"

namespace pvdisk::image::qcow2 {
namespace {

constexpr uint64_t kEntryFixedBytes = 40;

absl::Status Bad(const std::string& image, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(image, ": qcow2 snapshot table: ", what));
}

// Why snapshot `s`'s L1 table cannot be used, or empty.
std::string L1Problem(const Qcow2Header& header, const Snapshot& s,
                      uint64_t file_size, const MetadataLayout& layout) {
  const uint64_t cluster = header.cluster_size();
  if (s.l1_size > kMaxL1Entries) {
    return absl::StrCat("its L1 table of ", s.l1_size,
                        " entries is larger than ", kMaxL1Entries);
  }
  const uint64_t needed =
      (s.disk_size + header.bytes_per_l2() - 1) / header.bytes_per_l2();
  if (s.l1_size < needed) {
    return absl::StrCat("its L1 table of ", s.l1_size,
                        " entries cannot map its disk of ", s.disk_size,
                        " bytes");
  }
  if (s.l1_size == 0) return "";
  if (s.l1_table_offset == 0 || s.l1_table_offset % cluster != 0) {
    return absl::StrCat("its L1 table offset ", s.l1_table_offset,
                        " is not a cluster boundary past the header");
  }
  const uint64_t bytes = uint64_t{s.l1_size} * 8;
  if (s.l1_table_offset > file_size || bytes > file_size - s.l1_table_offset) {
    return absl::StrCat("its L1 table (", s.l1_table_offset, ", ", bytes,
                        " bytes) runs past the end of the file (", file_size,
                        " bytes)");
  }
  if (std::optional<Region> r = layout.Overlap(s.l1_table_offset, bytes)) {
    return absl::StrCat("its L1 table (", s.l1_table_offset, ", ", bytes,
                        " bytes) overlaps ", RegionName(*r));
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<Snapshot>> ParseSnapshotTable(
    const Qcow2Header& header, std::span<const uint8_t> bytes,
    uint64_t file_size, const MetadataLayout& layout,
    const std::string& image) {
  std::vector<Snapshot> out;
  if (header.nb_snapshots == 0) return out;
  if (header.nb_snapshots > kMaxSnapshots) {
    return Bad(image, absl::StrCat(header.nb_snapshots,
                                   " snapshots (nb_snapshots), at most ",
                                   kMaxSnapshots, " are allowed"));
  }
  const uint64_t start = header.snapshots_offset;
  uint64_t at = 0;
  auto past_end = [&](uint64_t entry, uint64_t need) {
    return Bad(image,
               absl::StrCat("entry ", entry, " (at ", start + at, ", ", need,
                            " bytes) runs past ",
                            bytes.size() >= kMaxSnapshotTableBytes
                                ? absl::StrCat("the ", kMaxSnapshotTableBytes,
                                               " bytes a table may take")
                                : absl::StrCat("the end of the file (",
                                               file_size, " bytes)")));
  };
  out.reserve(std::min<uint64_t>(header.nb_snapshots, 1024));
  for (uint32_t i = 0; i < header.nb_snapshots; ++i) {
    if (bytes.size() - at < kEntryFixedBytes) {
      return past_end(i, kEntryFixedBytes);
    }
    const uint8_t* p = bytes.data() + at;
    Snapshot s;
    s.l1_table_offset = LoadBe64(p);
    s.l1_size = LoadBe32(p + 8);
    const uint16_t id_bytes = LoadBe16(p + 12);
    const uint16_t name_bytes = LoadBe16(p + 14);
    s.date_sec = LoadBe32(p + 16);
    s.date_nsec = LoadBe32(p + 20);
    s.vm_clock_nsec = LoadBe64(p + 24);
    s.vm_state_size = LoadBe32(p + 32);
    const uint32_t extra = LoadBe32(p + 36);
    if (extra > kMaxSnapshotExtraBytes) {
      return Bad(image, absl::StrCat("entry ", i, " has ", extra,
                                     " bytes of extra data, at most ",
                                     kMaxSnapshotExtraBytes, " are allowed"));
    }
    const uint64_t unpadded =
        kEntryFixedBytes + uint64_t{extra} + id_bytes + name_bytes;
    const uint64_t entry = (unpadded + 7) / 8 * 8;
    // The last entry's padding may be cut off by the end of the file.
    if (bytes.size() - at < unpadded) return past_end(i, unpadded);
    const uint8_t* e = p + kEntryFixedBytes;
    if (extra >= 8) s.vm_state_size = LoadBe64(e);
    s.disk_size = extra >= 16 ? LoadBe64(e + 8) : header.size;
    const uint8_t* id = e + extra;
    s.id.assign(reinterpret_cast<const char*>(id), id_bytes);
    s.name.assign(reinterpret_cast<const char*>(id + id_bytes), name_bytes);
    s.problem = L1Problem(header, s, file_size, layout);
    s.entry_bytes = std::min<uint64_t>(entry, bytes.size() - at);
    at += s.entry_bytes;
    out.push_back(std::move(s));
  }
  // The table past its first cluster (CheckQcow2Layout placed that) must
  // not cover other metadata.
  const uint64_t first = std::min(header.cluster_size(), bytes.size());
  if (at > first) {
    if (std::optional<Region> r = layout.Overlap(start + first, at - first)) {
      return Bad(image, absl::StrCat("the table (", start, ", ", at,
                                     " bytes) overlaps ", RegionName(*r)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<Snapshot>> ReadSnapshotTable(
    int fd, const Qcow2Header& header, uint64_t file_size,
    const MetadataLayout& layout, const std::string& image) {
  if (header.nb_snapshots == 0) return std::vector<Snapshot>();
  if (header.snapshots_offset >= file_size) {
    return Bad(image, absl::StrCat("snapshots_offset ", header.snapshots_offset,
                                   " is past the end of the file (", file_size,
                                   " bytes)"));
  }
  if (header.nb_snapshots > kMaxSnapshots) {
    return ParseSnapshotTable(header, {}, file_size, layout, image);
  }
  // At most what nb_snapshots entries can take, and the file holds.
  const uint64_t most =
      uint64_t{header.nb_snapshots} *
      ((kEntryFixedBytes + kMaxSnapshotExtraBytes + 2 * 65535 + 7) / 8 * 8);
  std::vector<uint8_t> bytes(std::min(
      {file_size - header.snapshots_offset, kMaxSnapshotTableBytes, most}));
  if (absl::Status s = ReadFully(fd, header.snapshots_offset, bytes, image);
      !s.ok()) {
    return s;
  }
  return ParseSnapshotTable(header, bytes, file_size, layout, image);
}

absl::StatusOr<Snapshot> FindSnapshot(const std::vector<Snapshot>& snapshots,
                                      const std::string& key,
                                      const std::string& image) {
  const Snapshot* found = nullptr;
  for (const Snapshot& s : snapshots) {
    if (s.id == key) {
      found = &s;
      break;
    }
  }
  for (size_t i = 0; found == nullptr && i < snapshots.size(); ++i) {
    if (snapshots[i].name == key) found = &snapshots[i];
  }
  if (found == nullptr) {
    std::vector<std::string> names;
    for (const Snapshot& s : snapshots) {
      names.push_back(absl::StrCat(s.name, " (id ", s.id, ")"));
    }
    return absl::NotFoundError(absl::StrCat(
        image, ": no snapshot named ", key, "; ",
        names.empty()
            ? std::string("the image has no snapshots")
            : absl::StrCat("its snapshots: ", absl::StrJoin(names, ", "))));
  }
  if (!found->problem.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(image, ": snapshot ", found->name,
                     " cannot be used: ", found->problem));
  }
  return *found;
}

Qcow2Header SnapshotHeader(const Qcow2Header& header, const Snapshot& s) {
  Qcow2Header h = header;
  h.l1_table_offset = s.l1_table_offset;
  h.l1_size = s.l1_size;
  h.size = s.disk_size;
  return h;
}

}  // namespace pvdisk::image::qcow2

#include "image/qcow2/metadata.h"

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"

namespace pvdisk::image::qcow2 {

const char* EntryFaultName(EntryFault fault) {
  switch (fault) {
    case EntryFault::kNone:
      return "none";
    case EntryFault::kReservedBits:
      return "reserved bits are set";
    case EntryFault::kUnaligned:
      return "not aligned to a cluster";
    case EntryFault::kPastEnd:
      return "past the end of the file";
    case EntryFault::kIntoMetadata:
      return "overlaps other metadata";
  }
  return "invalid";
}

uint64_t Qcow2Metadata::L2TableOffset(uint64_t index) const {
  if (index >= l1.size() || l1_fault[index] != EntryFault::kNone) return 0;
  return l1[index] & kOffsetMask;
}

namespace {

// Checks a table (one cluster) at `offset` and adds it to the layout.
EntryFault PlaceTable(uint64_t offset, uint64_t cluster, uint64_t file_size,
                      Region region, MetadataLayout& layout) {
  if (offset % cluster != 0) return EntryFault::kUnaligned;
  if (offset > file_size || cluster > file_size - offset) {
    return EntryFault::kPastEnd;
  }
  if (!layout.Add(offset, cluster, region)) return EntryFault::kIntoMetadata;
  return EntryFault::kNone;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Qcow2Metadata>> BuildQcow2Metadata(
    const Qcow2Header& header, uint64_t file_size,
    std::span<const uint8_t> l1_bytes, std::span<const uint8_t> refcount_bytes,
    const std::string& image, size_t l2_cache_tables,
    size_t refblock_cache_tables) {
  absl::StatusOr<MetadataLayout> layout =
      CheckQcow2Layout(header, file_size, image);
  if (!layout.ok()) return layout.status();
  const uint64_t cluster = header.cluster_size();
  if (l1_bytes.size() < uint64_t{header.l1_size} * 8 ||
      refcount_bytes.size() < header.refcount_table_entries() * 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(image, ": qcow2 tables are shorter than the header says"));
  }
  auto md = std::make_unique<Qcow2Metadata>(l2_cache_tables,
                                            refblock_cache_tables, cluster);
  md->name = image;
  md->header = header;
  md->file_size = file_size;
  md->layout = std::move(*layout);

  // Refcount blocks first, then L2 tables: an L2 table over a refcount
  // block is the L1 entry's fault.
  const uint64_t refcount_entries = header.refcount_table_entries();
  md->refcount_table.resize(refcount_entries);
  md->refcount_table_fault.assign(refcount_entries, EntryFault::kNone);
  for (uint64_t i = 0; i < refcount_entries; ++i) {
    const uint64_t raw = LoadBe64(refcount_bytes.data() + 8 * i);
    md->refcount_table[i] = raw;
    if (raw == 0) continue;
    if (raw & kRefcountTableReserved) {
      md->refcount_table_fault[i] = EntryFault::kReservedBits;
      continue;
    }
    md->refcount_table_fault[i] =
        PlaceTable(raw, cluster, file_size, Region::kRefcountBlock, md->layout);
  }
  md->l1.resize(header.l1_size);
  md->l1_fault.assign(header.l1_size, EntryFault::kNone);
  for (uint64_t i = 0; i < header.l1_size; ++i) {
    const uint64_t raw = LoadBe64(l1_bytes.data() + 8 * i);
    md->l1[i] = raw;
    if ((raw & kOffsetMask) == 0 && (raw & kL1Reserved) == 0) continue;
    if (raw & kL1Reserved) {
      md->l1_fault[i] = EntryFault::kReservedBits;
      continue;
    }
    md->l1_fault[i] = PlaceTable(raw & kOffsetMask, cluster, file_size,
                                 Region::kL2Table, md->layout);
  }
  return md;
}

}  // namespace pvdisk::image::qcow2

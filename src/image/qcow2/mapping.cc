#include "image/qcow2/mapping.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "image/qcow2/compressed.h"
#include "image/qcow2/subclusters.h"

namespace pvdisk::image::qcow2 {

absl::StatusOr<MapStep> MapVirtual(Qcow2Metadata& md, uint64_t voff) {
  const Qcow2Header& h = md.header;
  if (voff >= h.size) {
    return absl::OutOfRangeError(
        absl::StrCat(md.name, ": virtual offset ", voff,
                     " is past the virtual size ", h.size));
  }
  const uint64_t cluster = h.cluster_size();
  const uint64_t l1_index = voff / h.bytes_per_l2();
  const uint64_t l2_index = (voff / cluster) % h.l2_entries();
  const bool extended = h.extended_l2();
  const uint64_t within = voff % cluster;
  Mapping m;
  m.bytes = std::min(cluster - within, h.size - voff);

  auto range_error = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(md.name, ": virtual offset ", voff,
                                            " (cluster ", voff / cluster,
                                            "): ", what));
  };
  if (md.l1_fault[l1_index] != EntryFault::kNone) {
    return range_error(
        absl::StrCat("L1 entry ", l1_index, " (0x", absl::Hex(md.l1[l1_index]),
                     "): ", EntryFaultName(md.l1_fault[l1_index])));
  }
  const uint64_t table = md.L2TableOffset(l1_index);
  if (table == 0) return MapStep(m);  // unallocated
  std::optional<uint64_t> raw =
      md.l2_cache.Entry64(table, extended ? 2 * l2_index : l2_index);
  if (!raw.has_value()) return MapStep(NeedTable{table});
  // The subcluster bitmap (0 for standard entries): read after the entry,
  // so a table evicted in between is loaded again.
  uint64_t bitmap = 0;
  if (extended) {
    std::optional<uint64_t> word = md.l2_cache.Entry64(table, 2 * l2_index + 1);
    if (!word.has_value()) return MapStep(NeedTable{table});
    bitmap = *word;
  }

  const L2Entry e = DecodeL2Entry(*raw, h.version, extended);
  auto entry_error = [&](const char* why) {
    return range_error(absl::StrCat("L2 entry ", l2_index, " (0x",
                                    absl::Hex(*raw), ") of the table at ",
                                    table, ": ", why));
  };
  if (extended) {
    if (const char* fault = SubclusterFault(*raw, e, bitmap)) {
      return entry_error(
          absl::StrCat(fault, " (bitmap 0x", absl::Hex(bitmap), ")").c_str());
    }
  }
  if (e.kind == L2Kind::kCompressed) {
    // The data lies inside the file (its last sector may be cut short by
    // the end of the file, as QEMU leaves it) and clear of metadata.
    const CompressedExtent c = DecodeCompressedEntry(*raw, h.cluster_bits);
    const uint64_t file_sectors_end = (md.file_size + 511) / 512 * 512;
    if (c.offset < h.cluster_size() || c.offset >= md.file_size ||
        c.length > file_sectors_end - c.offset) {
      return entry_error(EntryFaultName(EntryFault::kPastEnd));
    }
    const uint64_t held = std::min(c.length, md.file_size - c.offset);
    if (std::optional<Region> region = md.layout.Overlap(c.offset, held)) {
      return entry_error(
          absl::StrCat("compressed data inside ", RegionName(*region)).c_str());
    }
    m.kind = L2Kind::kCompressed;
    m.host_offset = c.offset;
    m.compressed_bytes = c.length;
    return MapStep(m);
  }
  if (e.reserved_bits)
    return entry_error(EntryFaultName(EntryFault::kReservedBits));
  m.kind = e.kind;
  if (extended) {
    // What the subcluster of `voff` reads as, for as many subclusters on as
    // read the same way.
    const uint64_t sub = cluster / kSubclusters;
    const uint32_t index = static_cast<uint32_t>(within / sub);
    const SubclusterRun run =
        SubclusterRunAt(DecodeSubclusterBitmap(bitmap), index);
    m.kind = run.kind;
    m.whole_cluster = run.count == kSubclusters;
    m.bytes = std::min((index + run.count) * sub - within, h.size - voff);
  }
  if (m.kind == L2Kind::kUnallocated && e.host_offset == 0) {
    return MapStep(m);
  }
  if (e.host_offset != 0) {
    if (e.host_offset % cluster != 0) {
      return entry_error(EntryFaultName(EntryFault::kUnaligned));
    }
    // A data cluster starts inside the file; its tail may lie past the end
    // (a file not yet grown to the whole cluster reads as zeros there).
    if (e.host_offset >= md.file_size) {
      return entry_error(EntryFaultName(EntryFault::kPastEnd));
    }
    if (std::optional<Region> region =
            md.layout.Overlap(e.host_offset, cluster)) {
      return entry_error(absl::StrCat("inside ", RegionName(*region)).c_str());
    }
  }
  m.host_cluster = e.host_offset;
  if (m.kind == L2Kind::kData) {
    m.host_offset = e.host_offset + within;
    m.writable_in_place = e.copied && (md.l1[l1_index] & kCopied) != 0;
  }
  return MapStep(m);
}

}  // namespace pvdisk::image::qcow2

#include "image/qcow2/refcount_rebuild.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/features.h"

namespace pvdisk::image::qcow2 {
namespace {

// The header field the dirty bit lives in.
constexpr uint64_t kIncompatibleFeaturesOffset = 72;

absl::Status Refuse(const Qcow2Metadata& md, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      md.name, ": dirty bit set, refcounts cannot be rebuilt: ", why,
      "; repair it with 'qemu-img check -r all'"));
}

}  // namespace

absl::StatusOr<RefcountRebuild> RefcountRebuild::Start(
    const Qcow2Metadata& md, std::span<const Snapshot> snapshots) {
  RefcountRebuild r(md);
  const Qcow2Header& h = md.header;
  if (h.nb_snapshots != snapshots.size()) {
    return Refuse(md, absl::StrCat("its snapshot table (", h.nb_snapshots,
                                   " snapshots) was not read"));
  }
  const uint64_t cluster = md.cluster_size();
  r.counts_.assign((md.file_size + cluster - 1) / cluster, 0);
  if (absl::Status s = r.Count(0, cluster, "the header"); !s.ok()) return s;
  if (h.l1_size > 0) {
    if (absl::Status s =
            r.Count(h.l1_table_offset, uint64_t{h.l1_size} * 8, "the L1 table");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = r.Count(h.refcount_table_offset,
                               uint64_t{h.refcount_table_clusters} * cluster,
                               "the refcount table");
      !s.ok()) {
    return s;
  }
  for (uint64_t i = 0; i < md.refcount_table.size(); ++i) {
    if (md.refcount_table_fault[i] != EntryFault::kNone) {
      return Refuse(md,
                    absl::StrCat("refcount table entry ", i, " is ",
                                 EntryFaultName(md.refcount_table_fault[i])));
    }
    const uint64_t block = md.refcount_table[i] & kOffsetMask;
    if (block == 0) continue;
    if (absl::Status s = r.Count(block, cluster, "a refcount block"); !s.ok()) {
      return s;
    }
  }
  if (!snapshots.empty()) {
    uint64_t table_bytes = 0;
    for (const Snapshot& s : snapshots) table_bytes += s.entry_bytes;
    if (absl::Status s =
            r.Count(h.snapshots_offset, std::max<uint64_t>(table_bytes, 1),
                    "the snapshot table");
        !s.ok()) {
      return s;
    }
  }
  for (const Snapshot& s : snapshots) {
    if (!s.problem.empty()) {
      return Refuse(
          md, absl::StrCat("snapshot ", s.id, " (", s.name, "): ", s.problem));
    }
    if (s.l1_size == 0) continue;
    const TableBytes l1{s.l1_table_offset, uint64_t{s.l1_size} * 8};
    if (absl::Status st = r.Count(l1.offset, l1.bytes, "a snapshot's L1 table");
        !st.ok()) {
      return st;
    }
    r.snapshot_l1_.push_back(l1);
  }
  for (uint64_t i = 0; i < md.l1.size(); ++i) {
    if (md.l1_fault[i] != EntryFault::kNone) {
      return Refuse(md, absl::StrCat("L1 entry ", i, " is ",
                                     EntryFaultName(md.l1_fault[i])));
    }
    if (absl::Status s = r.NameL2Table(md.l1[i], i, "the L1 table", true);
        !s.ok()) {
      return s;
    }
  }
  return r;
}

absl::Status RefcountRebuild::NameL2Table(uint64_t raw, uint64_t index,
                                          const char* l1_name, bool active) {
  const uint64_t cluster = md_->cluster_size();
  const uint64_t table = raw & kOffsetMask;
  if (raw & kL1Reserved) {
    return Refuse(*md_, absl::StrCat("entry ", index, " of ", l1_name,
                                     " has reserved bits set"));
  }
  if (table == 0) return absl::OkStatus();
  if (table % cluster != 0) {
    return Refuse(*md_, absl::StrCat("entry ", index, " of ", l1_name,
                                     " is not cluster-aligned"));
  }
  // A table the active disk uses too is in the layout as an L2 table.
  if (std::optional<Region> region = md_->layout.Overlap(table, cluster);
      region.has_value() && *region != Region::kL2Table) {
    return Refuse(*md_, absl::StrCat("entry ", index, " of ", l1_name,
                                     " points into ", RegionName(*region)));
  }
  if (absl::Status s = Count(table, cluster, "an L2 table"); !s.ok()) return s;
  TableRefs& refs = l2_refs_[table];
  if (refs.times == 0) l2_tables_.push_back(table);
  ++refs.times;
  if (active) {
    refs.active = true;
    if (raw & kCopied) copied_.push_back({table, index, 0});
  }
  return absl::OkStatus();
}

absl::Status RefcountRebuild::CountSnapshotL1Table(
    size_t index, std::span<const uint8_t> table) {
  if (index >= snapshot_l1_.size() ||
      table.size() < snapshot_l1_[index].bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        md_->name, ": no snapshot L1 table ", index, " of that size to count"));
  }
  const std::string name =
      absl::StrCat("the snapshot L1 table at ", snapshot_l1_[index].offset);
  for (uint64_t i = 0; i < snapshot_l1_[index].bytes / 8; ++i) {
    if (absl::Status s =
            NameL2Table(LoadBe64(table.data() + 8 * i), i, name.c_str(), false);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status RefcountRebuild::Count(uint64_t offset, uint64_t length,
                                    const char* what, uint64_t times) {
  const uint64_t cluster = md_->cluster_size();
  const uint64_t first = offset / cluster;
  const uint64_t last = (offset + length - 1) / cluster;
  if (length == 0 || offset + length < offset || last >= counts_.size()) {
    return Refuse(*md_, absl::StrCat(what, " at ", offset,
                                     " runs past the end of the file"));
  }
  const uint64_t max = MaxRefcount(md_->header.refcount_order);
  for (uint64_t c = first; c <= last; ++c) {
    if (max - counts_[c] < times) {
      return Refuse(*md_, absl::StrCat("cluster ", c,
                                       " is named more often "
                                       "than ",
                                       md_->header.refcount_bits(),
                                       "-bit refcounts can count"));
    }
    counts_[c] += times;
  }
  return absl::OkStatus();
}

absl::Status RefcountRebuild::CountL2Table(uint64_t offset,
                                           std::span<const uint8_t> table) {
  const Qcow2Header& h = md_->header;
  const uint64_t cluster = md_->cluster_size();
  if (table.size() < cluster) {
    return absl::InvalidArgumentError(
        absl::StrCat(md_->name, ": an L2 table is one cluster"));
  }
  const auto refs = l2_refs_.find(offset);
  if (refs == l2_refs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(md_->name, ": no L1 table names an L2 table at ", offset));
  }
  const uint64_t times = refs->second.times;
  for (uint64_t j = 0; j < h.l2_entries(); ++j) {
    const uint64_t raw = LoadBe64(table.data() + h.l2_entry_bytes() * j);
    if (raw & kL2Compressed) {
      // The compressed bytes: a 512-byte-aligned start and a sector count,
      // split where the cluster size puts the boundary.
      const uint32_t size_bits = h.cluster_bits - 8;
      const uint32_t shift = 62 - size_bits;
      const uint64_t sectors = ((raw >> shift) & ((1ull << size_bits) - 1)) + 1;
      const uint64_t start = (raw & ((1ull << shift) - 1)) & ~uint64_t{511};
      if (absl::Status s =
              Count(start, sectors * 512, "a compressed cluster", times);
          !s.ok()) {
        return s;
      }
      continue;
    }
    const L2Entry e = DecodeL2Entry(raw, h.version, h.extended_l2());
    if (e.reserved_bits) {
      return Refuse(*md_, absl::StrCat("L2 entry ", j, " of the table at ",
                                       offset, " has reserved bits set"));
    }
    if (e.host_offset == 0) continue;
    if (e.host_offset % cluster != 0) {
      return Refuse(*md_, absl::StrCat("L2 entry ", j, " of the table at ",
                                       offset, " is not cluster-aligned"));
    }
    if (std::optional<Region> region =
            md_->layout.Overlap(e.host_offset, cluster)) {
      return Refuse(*md_,
                    absl::StrCat("L2 entry ", j, " of the table at ", offset,
                                 " points into ", RegionName(*region)));
    }
    if (absl::Status s = Count(e.host_offset, cluster, "a data cluster", times);
        !s.ok()) {
      return s;
    }
    if (refs->second.active && e.copied) {
      copied_.push_back({e.host_offset, j, offset});
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WritePlan> RefcountRebuild::Plan() {
  const Qcow2Header& h = md_->header;
  const uint64_t cluster = md_->cluster_size();
  // The active disk writes a cluster with the copied flag in place: one a
  // snapshot shares too would change under the snapshot.
  for (const CopiedRef& c : copied_) {
    const uint64_t count = counts_[c.cluster / cluster];
    if (count == 1) continue;
    return Refuse(
        *md_,
        absl::StrCat(
            c.table == 0 ? std::string("L1 entry ") : absl::StrCat("L2 entry "),
            c.entry,
            c.table == 0 ? std::string()
                         : absl::StrCat(" of the table at ", c.table),
            " has the copied flag, but ", count,
            " references name its cluster"));
  }
  const uint64_t per_block = h.refcounts_per_block();
  const uint32_t order = h.refcount_order;
  std::vector<uint64_t> blocks(md_->refcount_table.size());
  for (uint64_t r = 0; r < blocks.size(); ++r) {
    blocks[r] = md_->refcount_table[r] & kOffsetMask;
  }
  // Ranges with clusters in use but no block get one past the end, which
  // counts itself and may need a block of its own: until none is missing.
  std::vector<uint64_t> added;  // refcount table indices of new blocks
  for (uint64_t r = 0; r * per_block < counts_.size(); ++r) {
    const uint64_t end =
        std::min<uint64_t>(counts_.size(), (r + 1) * per_block);
    const bool used =
        std::any_of(counts_.begin() + r * per_block, counts_.begin() + end,
                    [](uint64_t c) { return c != 0; });
    if (!used) continue;
    if (r >= blocks.size()) {
      return Refuse(
          *md_, absl::StrCat("the refcount table (", blocks.size(),
                             " entries) does not cover cluster ", r * per_block,
                             "; growing it is not supported"));
    }
    if (blocks[r] != 0) continue;
    blocks[r] = counts_.size() * cluster;
    counts_.push_back(1);
    added.push_back(r);
  }
  new_blocks_ = added.size();

  auto block_bytes = [&](uint64_t r) {
    std::vector<uint8_t> bytes(cluster, 0);
    const uint64_t end =
        std::min<uint64_t>(counts_.size(), (r + 1) * per_block);
    for (uint64_t c = r * per_block; c < end; ++c) {
      SetRefcount(bytes, c - r * per_block, order, counts_[c]);
    }
    return bytes;
  };
  WritePlan plan;
  for (uint64_t r : added) plan.push_back({blocks[r], block_bytes(r), false});
  bool barrier = true;  // the new blocks are durable before anything names them
  for (uint64_t r : added) {
    std::vector<uint8_t> entry(8);
    StoreBe64(entry.data(), blocks[r]);
    plan.push_back({h.refcount_table_offset + 8 * r, entry, barrier});
    barrier = false;
  }
  for (uint64_t r = 0; r < blocks.size(); ++r) {
    if (blocks[r] == 0 ||
        std::find(added.begin(), added.end(), r) != added.end()) {
      continue;
    }
    plan.push_back({blocks[r], block_bytes(r), barrier});
    barrier = false;
  }
  std::vector<uint8_t> features(8);
  StoreBe64(features.data(), h.incompatible_features & ~kIncompatDirty);
  plan.push_back({kIncompatibleFeaturesOffset, features, true});
  return plan;
}

uint64_t RefcountRebuild::clusters_in_use() const {
  return static_cast<uint64_t>(std::count_if(
      counts_.begin(), counts_.end(), [](uint64_t c) { return c != 0; }));
}

}  // namespace pvdisk::image::qcow2

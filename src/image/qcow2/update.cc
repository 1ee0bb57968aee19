#include "image/qcow2/update.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/table_copy.h"

namespace pvdisk::image::qcow2 {

absl::StatusOr<std::variant<Done, NeedTable>> EnsureL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t voff,
    WritePlan& plan, uint64_t* shared_table) {
  const uint64_t index = voff / md.header.bytes_per_l2();
  if (index >= md.l1.size()) {
    return absl::OutOfRangeError(absl::StrCat(md.name, ": virtual offset ",
                                              voff, " is past the L1 table"));
  }
  if (md.l1_fault[index] != EntryFault::kNone) {
    return absl::DataLossError(
        absl::StrCat(md.name, ": L1 entry ", index, ": ",
                     EntryFaultName(md.l1_fault[index])));
  }
  if ((md.l1[index] & kOffsetMask) != 0) {
    if ((md.l1[index] & kCopied) == 0) {
      if (shared_table != nullptr) {
        return CopySharedL2Table(md, allocator, index, plan, *shared_table);
      }
      return absl::FailedPreconditionError(absl::StrCat(
          md.name, ": the L2 table of L1 entry ", index,
          " is shared (a snapshot refers to it) and this writer does not "
          "copy it"));
    }
    return Done{};
  }
  absl::StatusOr<std::variant<Allocated, NeedTable>> got =
      allocator.Allocate(plan);
  if (!got.ok()) return got.status();
  if (auto* need = std::get_if<NeedTable>(&*got)) return *need;
  const uint64_t table = std::get<Allocated>(*got).host_offset;
  const uint64_t cluster = md.cluster_size();
  plan.push_back({table, std::vector<uint8_t>(cluster, 0), false});
  const uint64_t raw = table | kCopied;
  std::vector<uint8_t> entry(8);
  StoreBe64(entry.data(), raw);
  plan.push_back({md.header.l1_table_offset + 8 * index, entry, true});
  md.l1[index] = raw;
  md.layout.Add(table, cluster, Region::kL2Table);
  md.l2_cache.Insert(table, std::vector<uint8_t>(cluster, 0));
  return Done{};
}

absl::StatusOr<std::variant<Done, NeedTable>> SetL2Entry(Qcow2Metadata& md,
                                                         uint64_t voff,
                                                         uint64_t raw,
                                                         WritePlan& plan,
                                                         uint64_t bitmap) {
  const uint64_t table = md.L2TableOffset(voff / md.header.bytes_per_l2());
  if (table == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(md.name, ": virtual offset ", voff, " has no L2 table"));
  }
  const uint64_t index = (voff / md.cluster_size()) % md.header.l2_entries();
  const uint64_t width = md.header.l2_entry_bytes();
  std::vector<uint8_t> entry(width);
  StoreBe64(entry.data(), raw);
  if (width == 16) StoreBe64(entry.data() + 8, bitmap);
  if (!md.l2_cache.Access(table, [&](std::span<uint8_t> t) {
        std::memcpy(t.data() + width * index, entry.data(), width);
      })) {
    return NeedTable{table};
  }
  plan.push_back({table + width * index, entry, true});
  return Done{};
}

WritePlan ClearAutoclear(Qcow2Metadata& md) {
  if (md.header.version < 3 || md.header.autoclear_features == 0) return {};
  md.header.autoclear_features = 0;
  return {{88, std::vector<uint8_t>(8, 0), false}};
}

}  // namespace pvdisk::image::qcow2

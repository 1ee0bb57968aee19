#include "image/qcow2/table_copy.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"

namespace pvdisk::image::qcow2 {

absl::StatusOr<std::variant<Done, NeedTable>> CopySharedL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t index,
    WritePlan& plan, uint64_t& shared) {
  const uint64_t old_table = md.L2TableOffset(index);
  std::vector<uint8_t> copy;
  if (old_table == 0 ||
      !md.l2_cache.Access(old_table, [&](std::span<uint8_t> t) {
        copy.assign(t.begin(), t.end());
      })) {
    return absl::UnavailableError(
        absl::StrCat(md.name, ": the shared L2 table of L1 entry ", index,
                     " is not in the L2 cache to be copied"));
  }
  absl::StatusOr<std::variant<Allocated, NeedTable>> got =
      allocator.Allocate(plan);
  if (!got.ok()) return got.status();
  if (auto* need = std::get_if<NeedTable>(&*got)) return *need;
  const uint64_t table = std::get<Allocated>(*got).host_offset;
  // Every entry's copied flag cleared: each 64-bit entry (or, with wider
  // entries, the first word of each) starts a stride of the table.
  const uint64_t stride = copy.size() / md.header.l2_entries();
  for (uint64_t at = 0; at + 8 <= copy.size(); at += stride) {
    StoreBe64(copy.data() + at, LoadBe64(copy.data() + at) & ~kCopied);
  }
  plan.push_back({table, copy, false});
  const uint64_t raw = table | kCopied;
  std::vector<uint8_t> entry(8);
  StoreBe64(entry.data(), raw);
  plan.push_back({md.header.l1_table_offset + 8 * index, entry, true});
  md.l1[index] = raw;
  md.layout.Add(table, md.cluster_size(), Region::kL2Table);
  md.l2_cache.Insert(table, std::move(copy));
  shared = old_table;
  return Done{};
}

absl::StatusOr<std::variant<Done, NeedTable>> ReleaseSharedL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t table,
    WritePlan& plan) {
  absl::StatusOr<std::variant<uint64_t, NeedTable>> count =
      allocator.Refcount(table);
  if (!count.ok()) return count.status();
  if (auto* need = std::get_if<NeedTable>(&*count)) return *need;
  absl::StatusOr<std::variant<Done, NeedTable>> released =
      allocator.Release(table, plan);
  if (!released.ok() || !std::holds_alternative<Done>(*released)) {
    return released;
  }
  if (std::get<uint64_t>(*count) == 1) md.layout.Remove(table);
  return Done{};
}

}  // namespace pvdisk::image::qcow2

#include "image/qcow2/allocator.h"

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"

namespace pvdisk::image::qcow2 {

ClusterAllocator::ClusterAllocator(Qcow2Metadata& md)
    : md_(md),
      next_append_((md.file_size + md.cluster_size() - 1) / md.cluster_size()) {
}

absl::StatusOr<uint64_t> ClusterAllocator::BlockOf(uint64_t index) const {
  const uint64_t r = index / md_.header.refcounts_per_block();
  if (r >= md_.refcount_table.size()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        md_.name, ": cluster ", index, " is past what the refcount table (",
        md_.refcount_table.size(),
        " entries) covers; growing the table is not supported"));
  }
  if (md_.refcount_table_fault[r] != EntryFault::kNone) {
    return absl::DataLossError(
        absl::StrCat(md_.name, ": refcount table entry ", r, " (0x",
                     absl::Hex(md_.refcount_table[r]),
                     "): ", EntryFaultName(md_.refcount_table_fault[r])));
  }
  return md_.refcount_table[r] & kOffsetMask;
}

absl::StatusOr<std::variant<uint64_t, NeedTable>> ClusterAllocator::Refcount(
    uint64_t host_offset) {
  const uint64_t index = host_offset / md_.cluster_size();
  absl::StatusOr<uint64_t> block = BlockOf(index);
  if (!block.ok()) return block.status();
  if (*block == 0) return uint64_t{0};
  uint64_t count = 0;
  const uint64_t i = index % md_.header.refcounts_per_block();
  const uint32_t order = md_.header.refcount_order;
  if (!md_.refblock_cache.Access(*block, [&](std::span<uint8_t> b) {
        count = GetRefcount(b, i, order);
      })) {
    return NeedTable{*block};
  }
  return count;
}

absl::StatusOr<std::variant<Allocated, NeedTable>> ClusterAllocator::Allocate(
    WritePlan& plan) {
  const uint64_t cluster = md_.cluster_size();
  const uint64_t per_block = md_.header.refcounts_per_block();
  const uint32_t order = md_.header.refcount_order;
  // Each pass takes one candidate; a pass that does not return either used
  // the candidate for a new refcount block or skipped a cluster in use.
  for (int pass = 0; pass < 1024; ++pass) {
    const bool from_freed = !freed_.empty();
    const uint64_t c = from_freed ? freed_.back() : next_append_;
    auto consume = [&] {
      if (from_freed) {
        freed_.pop_back();
      } else {
        ++next_append_;
      }
    };
    absl::StatusOr<uint64_t> block = BlockOf(c);
    if (!block.ok()) return block.status();
    const uint64_t i = c % per_block;
    if (*block == 0) {
      // The new block lives in cluster c and counts itself.
      consume();
      const uint64_t r = c / per_block;
      std::vector<uint8_t> bytes(cluster, 0);
      SetRefcount(bytes, i, order, 1);
      plan.push_back({c * cluster, bytes, false});
      std::vector<uint8_t> entry(8);
      StoreBe64(entry.data(), c * cluster);
      plan.push_back({md_.header.refcount_table_offset + 8 * r, entry, true});
      md_.refcount_table[r] = c * cluster;
      md_.layout.Add(c * cluster, cluster, Region::kRefcountBlock);
      md_.refblock_cache.Insert(c * cluster, std::move(bytes));
      continue;
    }
    uint64_t count = 0;
    bool claimed = false;
    std::vector<uint8_t> changed;
    ByteRange range = RefcountBytes(i, order);
    if (!md_.refblock_cache.Access(*block, [&](std::span<uint8_t> b) {
          count = GetRefcount(b, i, order);
          if (count == 0) {
            SetRefcount(b, i, order, 1);
            changed.assign(b.begin() + range.offset,
                           b.begin() + range.offset + range.length);
            claimed = true;
          }
        })) {
      return NeedTable{*block};
    }
    consume();
    if (!claimed) continue;  // in use (refcounts past the end): skip it
    plan.push_back({*block + range.offset, std::move(changed), false});
    return Allocated{c * cluster};
  }
  return absl::DataLossError(absl::StrCat(
      md_.name,
      ": no free cluster among 1024 candidates past the end of the "
      "file: the refcounts are inconsistent"));
}

absl::StatusOr<std::variant<Done, NeedTable>> ClusterAllocator::Release(
    uint64_t host_offset, WritePlan& plan) {
  const uint64_t cluster = md_.cluster_size();
  const uint64_t c = host_offset / cluster;
  absl::StatusOr<uint64_t> block = BlockOf(c);
  if (!block.ok()) return block.status();
  if (*block == 0) {
    return absl::DataLossError(absl::StrCat(md_.name, ": freeing cluster at ",
                                            host_offset,
                                            " which has no refcount block"));
  }
  const uint32_t order = md_.header.refcount_order;
  const uint64_t i = c % md_.header.refcounts_per_block();
  const ByteRange range = RefcountBytes(i, order);
  uint64_t count = 0;
  std::vector<uint8_t> changed;
  if (!md_.refblock_cache.Access(*block, [&](std::span<uint8_t> b) {
        count = GetRefcount(b, i, order);
        if (count == 0) return;
        SetRefcount(b, i, order, count - 1);
        changed.assign(b.begin() + range.offset,
                       b.begin() + range.offset + range.length);
      })) {
    return NeedTable{*block};
  }
  if (count == 0) {
    return absl::DataLossError(absl::StrCat(md_.name, ": freeing cluster at ",
                                            host_offset,
                                            " whose refcount is already 0"));
  }
  plan.push_back({*block + range.offset, std::move(changed), true});
  if (count == 1 && reuse_freed_) freed_.push_back(c);
  return Done{};
}

}  // namespace pvdisk::image::qcow2

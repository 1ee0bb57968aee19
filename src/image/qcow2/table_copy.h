// Copy on write of an L2 table shared with an internal snapshot.
//
// A snapshot names the L2 tables of the disk as it was; while the disk
// still maps a range the same way, its L1 entry names the same table and
// the table's refcount is above 1, which the L1 entry's copied flag
// (bit 63) being clear says. Such a table must not change: before an entry
// of it changes, the table is copied to a new cluster that the disk alone
// names, and the disk's L1 entry then names the copy, copied flag set. The
// data clusters the table names keep their refcounts (the snapshot's table
// and the copy each name them, and each counted once already), so every
// entry of the copy has its copied flag clear: a write to one of them
// copies the data cluster first. The shared table itself loses the disk's
// reference, once the new L1 entry is durable (the caller releases it).
//
// Like update.h this does no I/O: the plan writes the copy, then after a
// barrier the L1 entry; the new cluster's refcount write comes first (from
// the allocator), so a crash leaks the copy at worst.
#pragma once

#include <cstdint>
#include <variant>

#include "absl/status/statusor.h"
#include "image/qcow2/allocator.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

// Copies the shared L2 table of L1 entry `index` and names the copy in
// the L1 table (memory, caches and `plan`); `shared` gets the shared
// table's offset, whose refcount the caller drops in a later stage.
// REQUIRES: the shared table is in md.l2_cache (Unavailable otherwise:
// the caller maps an offset of the table first); a NeedTable answer is a
// refcount block the allocator needs.
absl::StatusOr<std::variant<Done, NeedTable>> CopySharedL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t index,
    WritePlan& plan, uint64_t& shared);

// Drops the disk's reference to the shared table at `table` (after a
// barrier, as allocator Release does). A table that was not shared after
// all (refcount 1: an inconsistent image) is then free: it leaves the
// layout, so that its cluster may hold data.
absl::StatusOr<std::variant<Done, NeedTable>> ReleaseSharedL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t table,
    WritePlan& plan);

}  // namespace pvdisk::image::qcow2

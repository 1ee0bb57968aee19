// The changes to a qcow2 image's tables a write makes, as WritePlans
// (write_plan.h), in the crash-safe order; no I/O, like allocator.h.
//
// An allocating write of one cluster, as a caller carries it out:
//   1. EnsureL2Table for its L1 entry (allocates and zeroes a table, then
//      names it in the L1 table after a barrier);
//   2. allocator.Allocate a data cluster (its refcount write);
//   3. carry out the plan, then write the data to the cluster;
//   4. SetL2Entry to name the cluster (after a barrier: the refcount, and
//      the data, are durable before the entry names them);
//   5. if the entry named another cluster before, allocator.Release it
//      (after a barrier: the new entry is durable first).
#pragma once

#include <cstdint>
#include <variant>

#include "absl/status/statusor.h"
#include "image/qcow2/allocator.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

// Makes sure the L1 entry that maps `voff` names an L2 table that may be
// written in place. A table shared with a snapshot (its copied flag clear)
// is copied first (table_copy.h), and `shared_table` gets its offset for
// the caller to release; without `shared_table` it is refused
// (FailedPrecondition).
absl::StatusOr<std::variant<Done, NeedTable>> EnsureL2Table(
    Qcow2Metadata& md, ClusterAllocator& allocator, uint64_t voff,
    WritePlan& plan, uint64_t* shared_table = nullptr);

// Sets the L2 entry that maps `voff` to `raw` (EncodeL2Data(host) for a
// data cluster), and with extended L2 entries its subcluster bitmap to
// `bitmap` (subclusters.h), after a barrier. The L1 entry must name a
// table (EnsureL2Table first).
absl::StatusOr<std::variant<Done, NeedTable>> SetL2Entry(Qcow2Metadata& md,
                                                         uint64_t voff,
                                                         uint64_t raw,
                                                         WritePlan& plan,
                                                         uint64_t bitmap = 0);

// The header's autoclear field set to 0 (a writer must clear the bits it
// does not keep up to date, and pvdisk keeps none of them).
WritePlan ClearAutoclear(Qcow2Metadata& md);

}  // namespace pvdisk::image::qcow2

// RefcountRebuild: the refcounts of a dirty qcow2 image, counted anew from
// what the metadata references, as the writes that make the file's
// refcount blocks say so. The dirty bit (lazy refcounts, or a writer that
// did not close the image) means the refcounts may be stale; the allocator
// trusts them, so an image is rebuilt before it is opened for writing.
//
// Like the rest of the core it does no I/O: the caller feeds it the L2
// tables it names (l2_tables(), then CountL2Table for each), then asks for
// the plan and carries it out. What is counted: the header cluster, the
// clusters of the L1 table and of the refcount table, every refcount block
// the table names, every L2 table the L1 table names, and every cluster an
// L2 entry names (data, preallocated zero, and each cluster a compressed
// cluster's sectors touch).
//
// The plan, in a crash-safe order: new refcount blocks (for ranges that
// have clusters but no block yet, placed past the end of the file, each
// counting itself), then after a barrier their refcount table entries and
// every existing block rewritten with the new counts, then after a barrier
// the header with the dirty bit clear. Until that last write the dirty bit
// stays set, so a crash anywhere before it leaves an image the next open
// rebuilds again; after it every refcount is exact.
//
// Refused (FailedPrecondition, one line; the image is left as it was):
// images with internal snapshots (their tables are not walked), a table
// entry that is invalid (past the end, unaligned, into other metadata,
// reserved bits), a count the refcount width cannot hold, and refcounts
// the refcount table cannot cover (growing it is not supported).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

class RefcountRebuild {
 public:
  // Counts the metadata the header and the tables in `md` name; checks
  // what makes a rebuild impossible before any L2 table is read.
  static absl::StatusOr<RefcountRebuild> Start(const Qcow2Metadata& md);

  // The L2 tables to count, one cluster each.
  const std::vector<uint64_t>& l2_tables() const { return l2_tables_; }
  // Counts the clusters the entries of the L2 table at `offset` name.
  absl::Status CountL2Table(uint64_t offset, std::span<const uint8_t> table);

  // The writes that make the file's refcounts the counted ones and then
  // clear the dirty bit. Call once, after every L2 table was counted.
  absl::StatusOr<WritePlan> Plan();

  // Clusters in use (refcount above 0) once the plan is carried out.
  uint64_t clusters_in_use() const;

 private:
  explicit RefcountRebuild(const Qcow2Metadata& md) : md_(&md) {}
  // Raises the count of every cluster of [offset, offset + length).
  absl::Status Count(uint64_t offset, uint64_t length, const char* what);

  const Qcow2Metadata* md_;
  std::vector<uint64_t> counts_;  // by cluster index, up to the file's end
  std::vector<uint64_t> l2_tables_;
  uint64_t new_blocks_ = 0;
};

}  // namespace pvdisk::image::qcow2

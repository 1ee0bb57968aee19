// RefcountRebuild: the refcounts of a dirty qcow2 image, counted anew from
// what the metadata references, as the writes that make the file's
// refcount blocks say so. The dirty bit (lazy refcounts, or a writer that
// did not close the image) means the refcounts may be stale; the allocator
// trusts them, so an image is rebuilt before it is opened for writing.
//
// Like the rest of the core it does no I/O: the caller feeds it the
// snapshots' L1 tables (snapshot_l1_tables(), then CountSnapshotL1Table
// for each), then the L2 tables they and the active L1 table name
// (l2_tables(), then CountL2Table for each), then asks for the plan and
// carries it out. What is counted, one reference each time something
// names it (as QEMU counts): the header cluster, the clusters of the L1
// table, of the refcount table, of the snapshot table and of each
// snapshot's L1 table, every refcount block the table names, every L2
// table once for each L1 table (the active one, a snapshot's) that names
// it, and every cluster an L2 entry names (data, preallocated zero, and
// each cluster a compressed cluster's sectors touch) once for each L1
// table that names that L2 table. So a table or cluster an internal
// snapshot shares with the active disk counts 2 or more.
//
// The plan, in a crash-safe order: new refcount blocks (for ranges that
// have clusters but no block yet, placed past the end of the file, each
// counting itself), then after a barrier their refcount table entries and
// every existing block rewritten with the new counts, then after a barrier
// the header with the dirty bit clear. Until that last write the dirty bit
// stays set, so a crash anywhere before it leaves an image the next open
// rebuilds again; after it every refcount is exact.
//
// Refused (FailedPrecondition, one line; the image is left as it was): a
// snapshot whose L1 table cannot be used (snapshot_table.h's problem), a
// table entry that is invalid (past the end, unaligned, into other
// metadata, reserved bits), an L1 or L2 entry of the active disk that says
// its table or cluster is not shared (the copied flag) while the counts
// say it is (a write in place would change a snapshot), a count the
// refcount width cannot hold, and refcounts the refcount table cannot
// cover (growing it is not supported).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/snapshot_table.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

class RefcountRebuild {
 public:
  // Counts the metadata the header, the tables in `md` and the snapshot
  // table (`snapshots`, as ParseSnapshotTable read them: every one of the
  // header's nb_snapshots) name; checks what makes a rebuild impossible
  // before any table is read.
  static absl::StatusOr<RefcountRebuild> Start(
      const Qcow2Metadata& md, std::span<const Snapshot> snapshots = {});

  // The snapshots' L1 tables to count: where each is and its bytes.
  struct TableBytes {
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  const std::vector<TableBytes>& snapshot_l1_tables() const {
    return snapshot_l1_;
  }
  // Counts the L2 tables the L1 table snapshot_l1_tables()[index] (its
  // bytes: `table`) names. Each once, before l2_tables() is used.
  absl::Status CountSnapshotL1Table(size_t index,
                                    std::span<const uint8_t> table);

  // The L2 tables to count, each once (one cluster each), in the order
  // they were first named.
  const std::vector<uint64_t>& l2_tables() const { return l2_tables_; }
  // Counts the clusters the entries of the L2 table at `offset` name (as
  // often as L1 tables name the table).
  absl::Status CountL2Table(uint64_t offset, std::span<const uint8_t> table);

  // The writes that make the file's refcounts the counted ones and then
  // clear the dirty bit. Call once, after every L2 table was counted.
  absl::StatusOr<WritePlan> Plan();

  // Clusters in use (refcount above 0) once the plan is carried out.
  uint64_t clusters_in_use() const;

 private:
  explicit RefcountRebuild(const Qcow2Metadata& md) : md_(&md) {}
  // Raises the count of every cluster of [offset, offset + length) by
  // `times`.
  absl::Status Count(uint64_t offset, uint64_t length, const char* what,
                     uint64_t times = 1);
  // Counts the L2 table an L1 entry names (`raw`, entry `index` of the L1
  // table `l1_name`), and notes it for l2_tables().
  absl::Status NameL2Table(uint64_t raw, uint64_t index, const char* l1_name,
                           bool active);

  const Qcow2Metadata* md_;
  std::vector<uint64_t> counts_;  // by cluster index, up to the file's end
  std::vector<TableBytes> snapshot_l1_;
  std::vector<uint64_t> l2_tables_;
  // By L2 table: how many L1 entries name it, and whether the active L1
  // table is one of them.
  struct TableRefs {
    uint64_t times = 0;
    bool active = false;
  };
  std::unordered_map<uint64_t, TableRefs> l2_refs_;
  // Clusters (tables, data) the active disk's entries say are not shared
  // (the copied flag), with where that was said: checked against the
  // counts in Plan().
  struct CopiedRef {
    uint64_t cluster = 0;
    uint64_t entry = 0;
    uint64_t table = 0;  // 0: the L1 table
  };
  std::vector<CopiedRef> copied_;
  uint64_t new_blocks_ = 0;
};

}  // namespace pvdisk::image::qcow2

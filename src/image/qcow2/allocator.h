// ClusterAllocator: finds clusters for new data and tables in a qcow2 file
// and keeps their refcounts. Clusters freed while the image is open are
// reused first; otherwise clusters are appended past the end of the file
// (a free cluster inside the file that was never freed here is not looked
// for: that needs a scan of every refcount block).
//
// Like mapping.h it does no I/O: it changes the metadata in memory and the
// caches, appends the writes that make those changes durable to a
// WritePlan (write_plan.h), and answers NeedTable when a refcount block it
// needs is not cached. A caller that gets NeedTable loads the block into
// md.refblock_cache and calls again with the same plan; whatever the plan
// holds must be carried out, even if a later step fails, because memory
// already reflects it.
//
// A refcount block that does not exist yet is placed in the first cluster
// it covers (the one being allocated), counting itself. The refcount table
// does not grow: an allocation past what it covers fails (ResourceExhausted);
// with one cluster of table that is 4 GiB of file for 4 KiB clusters and
// 16 TiB for 64 KiB clusters, at 16-bit refcounts.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

struct Allocated {
  uint64_t host_offset;  // cluster-aligned
};
struct Done {};

class ClusterAllocator {
 public:
  explicit ClusterAllocator(Qcow2Metadata& md);

  // One cluster, its refcount raised from 0 to 1.
  absl::StatusOr<std::variant<Allocated, NeedTable>> Allocate(WritePlan& plan);
  // Lowers the refcount of the cluster at `host_offset` by one, after a
  // barrier (the entries that stopped naming it go first). A cluster whose
  // count reaches 0 is reused by later allocations.
  absl::StatusOr<std::variant<Done, NeedTable>> Release(uint64_t host_offset,
                                                        WritePlan& plan);
  // The refcount of the cluster at `host_offset`.
  absl::StatusOr<std::variant<uint64_t, NeedTable>> Refcount(
      uint64_t host_offset);

  // Whether clusters whose refcount Release brings to 0 are handed out
  // again (the default). A server turns it off: a request that mapped a
  // cluster before its release may still be in flight to it, and a reuse
  // would let that request read or overwrite the new owner's data. The
  // released clusters stay free in the file (refcount 0; not a leak).
  void set_reuse_freed(bool reuse) { reuse_freed_ = reuse; }

  // The next cluster appended past the end (for tests and info).
  uint64_t next_append() const { return next_append_ * md_.cluster_size(); }

 private:
  // The refcount block covering cluster `index`: its offset, 0 if none yet.
  absl::StatusOr<uint64_t> BlockOf(uint64_t index) const;

  Qcow2Metadata& md_;
  uint64_t next_append_;         // cluster index
  std::vector<uint64_t> freed_;  // cluster indices with refcount 0
  bool reuse_freed_ = true;
};

}  // namespace pvdisk::image::qcow2

// WritePlan: the metadata writes one change of a qcow2 image needs, in the
// order they must reach the file. A write with barrier_before must not start
// until every write before it (and every data write the caller made before
// carrying out the plan) is durable: fdatasync on the control path, a flush
// in the engine's chain on the request path. That is how the crash-safe
// orders are kept:
// - a cluster's new refcount reaches the disk before the L2 (or L1) entry
//   that names the cluster, so a crash leaks a cluster at worst, never
//   names a cluster whose refcount says it is free;
// - a new refcount block reaches the disk before the refcount table entry
//   that names it;
// - an entry that stops naming a cluster reaches the disk before the
//   cluster's refcount drops, so a freed cluster is never still named.
#pragma once

#include <cstdint>
#include <vector>

namespace pvdisk::image::qcow2 {

struct MetadataWrite {
  uint64_t offset = 0;
  std::vector<uint8_t> bytes;
  bool barrier_before = false;
};

using WritePlan = std::vector<MetadataWrite>;

}  // namespace pvdisk::image::qcow2

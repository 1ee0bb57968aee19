// Mapping a virtual offset of a qcow2 image to where its bytes are.
//
// The shape: MapVirtual never does I/O. It answers from the metadata in
// memory (L1 table) and the L2 cache, and when the L2 table it needs is not
// cached it answers NeedTable{offset}: the caller reads that cluster (a
// pread on the control path, an engine read on the request path), puts it
// in md.l2_cache and asks again. So the same mapping logic serves the
// synchronous driver (qcow2_file.h) and, later, an engine decorator that
// must not block.
//
// Refusals for one range are errors of that range only (DataLoss, naming
// the virtual offset and the entry): the serving layer returns EIO for the
// request and the rest of the image stays readable.
#pragma once

#include <cstdint>
#include <variant>

#include "absl/status/statusor.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/metadata.h"

namespace pvdisk::image::qcow2 {

struct Mapping {
  // kData: read `bytes` at host_offset. kZero: zeros. kUnallocated: the
  // backing file at the same virtual offset, or zeros without one.
  // kCompressed: the cluster is the compressed data at host_offset, at
  // most compressed_bytes long (compressed.h), inflated.
  L2Kind kind = L2Kind::kUnallocated;
  // kData: host byte of the virtual offset. kCompressed: host byte where
  // the cluster's compressed data starts.
  uint64_t host_offset = 0;
  uint64_t compressed_bytes = 0;  // kCompressed: CompressedExtent::length
  // Bytes from the virtual offset to the end of its cluster (or of the
  // virtual disk, if sooner): the mapping holds for all of them. With
  // extended L2 entries (subclusters.h), to the end of the run of
  // subclusters that read the same way instead.
  uint64_t bytes = 0;
  // The mapping holds for the whole cluster (false: for a run of its
  // subclusters only, `bytes` from the virtual offset).
  bool whole_cluster = true;
  // kData: the cluster's refcount is 1 (L1 and L2 copied flags), so it may
  // be written in place (`bytes` of it, for subclusters).
  bool writable_in_place = false;
  // The cluster named by the entry (kData, and kZero when preallocated;
  // with subclusters, whatever the subcluster reads as).
  uint64_t host_cluster = 0;
};

struct NeedTable {
  uint64_t offset;  // host offset of the table (one cluster) to load
};

using MapStep = std::variant<Mapping, NeedTable>;

// Maps virtual offset `voff` (below the virtual size; OutOfRange
// otherwise).
absl::StatusOr<MapStep> MapVirtual(Qcow2Metadata& md, uint64_t voff);

}  // namespace pvdisk::image::qcow2

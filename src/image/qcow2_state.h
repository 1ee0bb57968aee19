// Qcow2State: what every engine of one qcow2 disk shares: the backing chain
// with each layer's metadata (qcow2/chain.h), and the one lock that orders
// the metadata's readers against its writers. Engines (qcow2_engine.h) map
// requests through it; the steps that change metadata (an allocating write,
// a discard, a write of zeroes) run here, whole, under the lock held
// exclusively, so two requests can never allocate the same cluster or
// table: the second finds the first's cluster and writes in place.
//
// Metadata I/O is synchronous, on the chain's own buffered descriptors:
// an L2 table missing from the cache is read with pread (once per table
// with the default cache, which holds every table the disk can have), and
// an allocation carries out its WritePlans with pwrite and fdatasync for
// each barrier. Data I/O of reads and of writes in place never comes here:
// the engine issues it on its inner engine, asynchronously.
//
// The crash-safe orders of write_plan.h hold: a new cluster's refcount and
// its data (copied from the backing layer where the write does not cover
// the cluster) are durable before the L2 entry names it; a new L2 table is
// durable before the L1 entry names it; an entry that stops naming a
// cluster is durable before the cluster's refcount drops. An allocating
// write returns once its metadata writes are done (not yet durable): a
// flush of the top file (fdatasync) then makes the write and its metadata
// durable together.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>

#include "absl/status/statusor.h"
#include "image/qcow2/chain.h"
#include "image/qcow2/mapping.h"
#include "io/io_engine.h"

namespace pvdisk::image {

// What one engine counted of its metadata work (stats/counters.h names).
using Qcow2Counts = io::FormatCounts;

class Qcow2State {
 public:
  // `chain`'s top is a qcow2 layer (read-write unless `read_only`).
  Qcow2State(std::unique_ptr<qcow2::ImageChain> chain, bool read_only);

  qcow2::ImageChain& chain() { return *chain_; }
  size_t layers() const { return layers_; }
  uint64_t size() const { return size_; }
  uint64_t cluster_size() const { return cluster_size_; }
  bool read_only() const { return read_only_; }

  // Held shared around Map and the use of its answer; exclusively by the
  // steps below that change metadata.
  std::shared_mutex& mutex() { return mutex_; }

  // The mapping of `voff` in qcow2 layer `layer`, reading its L2 table
  // into the cache if it is not there. REQUIRES: mutex() held (either way).
  absl::StatusOr<qcow2::Mapping> Map(size_t layer, uint64_t voff,
                                     Qcow2Counts& counts);
  // Where layer `layer`'s file ends now (it grows as clusters are
  // appended). REQUIRES: mutex() held.
  uint64_t FileEnd(size_t layer) const;

  // Writes `data` at `voff` (inside one cluster of the top layer) when the
  // cluster must be allocated first: allocates it, copies what `data` does
  // not cover from the backing layers (or zeros), and names it in the L2
  // table, in the crash-safe order. Returns the host offset to write `data`
  // at instead when the cluster turns out writable in place (another
  // request allocated it meanwhile); nullopt when the write is done. Takes
  // mutex() exclusively.
  absl::StatusOr<std::optional<uint64_t>> WriteAllocating(
      uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts);

  // kDiscard or kWriteZeroes of [voff, voff + length), inside one cluster
  // of the top layer. A whole cluster becomes unallocated (discard without
  // a backing file) or a zero cluster (version 3), and its host cluster is
  // given back after the entry is durable; otherwise zeros are written.
  // Takes mutex() exclusively.
  absl::Status Deallocate(io::IoOp op, uint64_t voff, uint64_t length,
                          Qcow2Counts& counts);

  // fdatasync of the top file.
  absl::Status Flush();

 private:
  // WriteAllocating with mutex() held exclusively.
  absl::StatusOr<std::optional<uint64_t>> WriteAllocatingLocked(
      uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts);
  // Carries out `plan` (every write of it, even after an earlier step
  // failed: memory already reflects it), counting its writes.
  absl::Status Apply(const qcow2::WritePlan& plan, Qcow2Counts& counts);
  qcow2::Qcow2File& top() { return *chain_->layers().front().qcow2; }

  std::unique_ptr<qcow2::ImageChain> chain_;
  const bool read_only_;
  const size_t layers_;
  const uint64_t size_;
  const uint64_t cluster_size_;
  std::shared_mutex mutex_;
};

}  // namespace pvdisk::image

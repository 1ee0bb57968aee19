// Qcow2State: what every engine of one qcow2 disk shares: the backing chain
// with each layer's metadata (qcow2/chain.h), the mappings published for
// lock-free readers (qcow2/published_map.h), the journal of metadata writes
// not yet in the file (qcow2/metadata_journal.h), and the one lock that
// orders the metadata's readers against its writers. Engines
// (qcow2_engine.h) map requests through it; the steps that change metadata
// (an allocating write, a discard, a write of zeroes) run here, whole,
// under the lock held exclusively, so two requests can never allocate the
// same cluster or table: the second finds the first's cluster and writes
// in place.
//
// Reading a mapping: a published cluster is read without any lock (when
// the L2 cache can hold every table of a layer, the default, each cluster
// is published once it has been mapped); otherwise Map runs under the lock
// held shared, reads a missing L2 table with pread, and publishes what it
// found. A change of an L2 entry withdraws the cluster's mapping.
//
// Write-back metadata: a change updates the tables in memory and puts its
// metadata writes in the journal, in stages that keep write_plan.h's
// orders (refcounts before the L2 entry that names their cluster, a new L2
// table before the L1 entry that names it, an entry that stops naming a
// cluster before the cluster's refcount drops). Commit writes the journal
// stage by stage with an fdatasync between stages: on a flush (FUSE FSYNC,
// unmount), when the journal grows past a bound, and before a change that
// must read a table from the file is answered from stale bytes (a table
// read back from the file gets the journal's writes laid over it). So an
// allocating write costs no flush of its own; a flush costs one per stage
// (two for allocating writes), however many allocations it covers. In a
// backend process, which can die and be replaced while the disk goes on,
// the engine commits before it answers a request that changed metadata
// instead (set_commit_before_answer): one commit for each batch of
// answers.
//
// Data: the file is extended over new clusters a few MiB at a time (holes,
// reading zeros; trimmed back to the last cluster in use when the state
// ends). A cluster allocated where nothing is to be copied (no backing
// file shows through, or a zero cluster) is such a hole: it is not written
// here, the engine writes the request's bytes in place, asynchronously,
// on its inner engine. Otherwise the cluster is written whole (the request's
// bytes and what it copies) with pwrite before its L2 entry is journalled.
// Either way the commit's first fdatasync makes completed data durable
// before the stage that holds the L2 entry is written. With extended L2
// entries the same is done by subcluster (qcow2_subclusters.cc): only the
// subclusters a write touches are filled and marked allocated.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "image/qcow2/chain.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata_journal.h"
#include "image/qcow2/published_map.h"
#include "io/io_engine.h"

namespace pvdisk::image {

// What one engine counted of its metadata work (stats/counters.h names).
using Qcow2Counts = io::FormatCounts;

class Qcow2State {
 public:
  // `chain`'s top is a qcow2 layer (read-write unless `read_only`).
  Qcow2State(std::unique_ptr<qcow2::ImageChain> chain, bool read_only);
  // Commits what the journal holds (best effort: its errors are logged).
  ~Qcow2State();

  qcow2::ImageChain& chain() { return *chain_; }
  size_t layers() const { return layers_; }
  uint64_t size() const { return size_; }
  uint64_t cluster_size() const { return cluster_size_; }
  bool read_only() const { return read_only_; }

  // Held shared around Map and the use of its answer; exclusively by the
  // steps below that change metadata.
  std::shared_mutex& mutex() { return mutex_; }

  // The published mapping of `voff` in qcow2 layer `layer`, without a
  // lock; counts an L2 hit. nullopt: ask Map.
  std::optional<qcow2::Mapping> Find(size_t layer, uint64_t voff,
                                     Qcow2Counts& counts) const;
  // The mapping of `voff` in qcow2 layer `layer`, reading its L2 table
  // into the cache if it is not there, and publishing it. REQUIRES:
  // mutex() held (either way).
  absl::StatusOr<qcow2::Mapping> Map(size_t layer, uint64_t voff,
                                     Qcow2Counts& counts);
  // Find, or Map with mutex() held shared.
  absl::StatusOr<qcow2::Mapping> MapShared(size_t layer, uint64_t voff,
                                           Qcow2Counts& counts);
  // Where layer `layer`'s file ends now (it grows as clusters are
  // appended). Any thread, no lock.
  uint64_t FileEnd(size_t layer) const {
    return file_end_[layer].load(std::memory_order_acquire);
  }
  // Reads bytes of layer `layer`'s file with pread (the part of a sector
  // at the end of a file that does not end on a sector boundary).
  absl::Status ReadFileBytes(size_t layer, uint64_t offset,
                             std::span<uint8_t> out);

  // Writes `data` at `voff` (inside one cluster of the top layer) when the
  // cluster must be allocated first: allocates it, copies what `data` does
  // not cover from the backing layers, the cluster a snapshot shares, or
  // zeros, unless the new cluster reads as those bytes already, and names
  // it in the L2 table (an L2 table a snapshot shares copied first, and
  // its reference and the old cluster's dropped in later stages). Returns
  // the host offset to write `data` at instead when the cluster turns out
  // writable in place (another request allocated it meanwhile) or is a new
  // cluster that needs only `data`; nullopt when the write is done. Takes
  // mutex() exclusively.
  absl::StatusOr<std::optional<uint64_t>> WriteAllocating(
      uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts);

  // kDiscard or kWriteZeroes of [voff, voff + length), inside one cluster
  // of the top layer. A whole cluster becomes unallocated (discard without
  // a backing file) or a zero cluster (version 3), and its host cluster is
  // given back in a later stage than the entry's; otherwise zeros are
  // written. Takes mutex() exclusively.
  absl::Status Deallocate(io::IoOp op, uint64_t voff, uint64_t length,
                          Qcow2Counts& counts);

  // Writes the journal to the file, stage by stage, with an fdatasync
  // between stages but not after the last: the caller's flush of the top
  // file follows. Takes mutex() exclusively. Once a commit failed, every
  // later one fails too (memory holds changes the file may lack).
  absl::Status Commit(Qcow2Counts& counts);
  // Commit, then fdatasync of the top file.
  absl::Status Flush();

  // Whether an engine commits the journal before it answers a request
  // that changed metadata (a backend process's open: the process may die
  // and a new one take over without the applications noticing, so nothing
  // answered may live only in its memory). Off: a flush commits.
  void set_commit_before_answer(bool on) { commit_before_answer_ = on; }
  bool commit_before_answer() const { return commit_before_answer_; }

 private:
  // WriteAllocating with mutex() held exclusively.
  absl::StatusOr<std::optional<uint64_t>> WriteAllocatingLocked(
      uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts);
  // Puts `plan` in the journal, as part of the change journal_.Begin()
  // started; a plan always goes in, even after a step failed: memory
  // already reflects it. Commits when the journal grows past its bound.
  absl::Status Journal(const qcow2::WritePlan& plan, Qcow2Counts& counts);
  // Gives back the references the top layer's entry `m` held (its
  // cluster, or each host cluster its compressed data touches), after the
  // entry changed; in stages after the entry's. REQUIRES: mutex() held
  // exclusively, journal_.Begin() called for the change.
  absl::Status ReleaseNamed(const qcow2::Mapping& m, Qcow2Counts& counts);
  // Drops one reference to the cluster at `host_cluster`, in a stage after
  // the entries journalled before; the same REQUIRES.
  absl::Status ReleaseCluster(uint64_t host_cluster, Qcow2Counts& counts);
  // The same for the L2 table a copy replaced (table_copy.h; 0: none).
  absl::Status ReleaseSharedTable(uint64_t table, Qcow2Counts& counts);
  // Commit with mutex() held exclusively.
  absl::Status CommitLocked(Qcow2Counts& counts);
  // Allocates a cluster for the top layer's cluster of `voff` (its L2
  // table first if needed), journals the refcount writes and extends the
  // file over it; as part of the change journal_.Begin() started.
  // REQUIRES: mutex() held exclusively.
  absl::StatusOr<uint64_t> AllocateClusterLocked(uint64_t voff,
                                                 Qcow2Counts& counts);
  // With extended L2 entries (qcow2_subclusters.cc): WriteAllocatingLocked
  // and Deallocate by subcluster. REQUIRES: mutex() held exclusively.
  absl::StatusOr<std::optional<uint64_t>> WriteSubclustersLocked(
      uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts);
  absl::Status DeallocateSubclustersLocked(io::IoOp op, uint64_t voff,
                                           uint64_t length,
                                           Qcow2Counts& counts);
  // Raises layer 0's file end (md.file_size and FileEnd) to `end`.
  void GrowFileEnd(uint64_t end);
  qcow2::Qcow2File& top() { return *chain_->layers().front().qcow2; }

  std::unique_ptr<qcow2::ImageChain> chain_;
  const bool read_only_;
  const size_t layers_;
  const uint64_t size_;
  const uint64_t cluster_size_;
  const bool extended_l2_;  // the top layer's L2 entries have subclusters
  std::shared_mutex mutex_;
  // By layer: null for a raw layer, or when the L2 cache cannot hold
  // every table of the layer (a mapping is then as good as its table).
  std::vector<std::unique_ptr<qcow2::PublishedMap>> published_;
  std::unique_ptr<std::atomic<uint64_t>[]> file_end_;  // by layer
  // Guarded by mutex() held exclusively (read under it held shared).
  qcow2::MetadataJournal journal_;
  uint64_t disk_end_ = 0;    // how far the top file really extends
  uint64_t used_end_ = 0;    // the end of its last cluster in use
  uint64_t fresh_from_ = 0;  // clusters from here on were never written
  absl::Status commit_failed_;
  bool commit_before_answer_ = false;
};

}  // namespace pvdisk::image

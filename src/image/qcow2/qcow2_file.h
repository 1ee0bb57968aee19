// Qcow2File: the synchronous driver of one qcow2 file: it opens the file's
// metadata (header, L1 and refcount tables; Qcow2Metadata) and carries out
// what the I/O-free core asks for through its HostFile (host_file.h;
// pread/pwrite/fdatasync on the descriptor unless an owner puts another
// over the same file): it loads the tables MapVirtual and the allocator
// answer NeedTable for, and it carries out WritePlans, turning each barrier
// into a sync. For the control path (create, info, tests) and the
// metadata steps of the request path (image/qcow2_state.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "image/qcow2/allocator.h"
#include "image/qcow2/host_file.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/snapshot_table.h"
#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

inline constexpr uint64_t kL2CacheWholeDisk = ~uint64_t{0};
inline constexpr uint64_t kMaxDefaultL2CacheBytes = uint64_t{32} << 20;

// The L2 tables an L2 cache of `bytes` holds for `header` (see
// Qcow2File::Open): at least one.
size_t L2CacheTablesFor(const Qcow2Header& header, uint64_t bytes);

class Qcow2File {
 public:
  // Opens the qcow2 metadata of `fd` (borrowed; it must outlive this).
  // `writable` also refuses what cannot be written, clears the autoclear
  // bits in the file and, for an image with the dirty bit, rebuilds its
  // refcounts first (refcount_rebuild.h; durable, then the dirty bit
  // cleared) and says so in one line on stderr. A read-only open takes a
  // dirty image as it is: reads do not use the refcounts. The L2 cache
  // holds `l2_cache_tables` tables; when `l2_cache_bytes` is not 0, that
  // many bytes of tables instead (at least one), and kL2CacheWholeDisk:
  // every table the virtual disk can have, at most kMaxDefaultL2CacheBytes.
  // The snapshot table is read and checked (snapshot_table.h); with
  // `snapshot` (an id or name; read-only only) the file maps that
  // snapshot's disk instead: its L1 table and its size.
  static absl::StatusOr<std::unique_ptr<Qcow2File>> Open(
      int fd, const std::string& name, bool writable,
      size_t l2_cache_tables = kDefaultL2CacheTables,
      uint64_t l2_cache_bytes = 0, const std::string& snapshot = "");

  Qcow2Metadata& metadata() { return *md_; }
  // The image's internal snapshots (snapshot_table.h).
  const std::vector<Snapshot>& snapshots() const { return snapshots_; }
  const Qcow2Header& header() const { return md_->header; }
  ClusterAllocator& allocator() { return allocator_; }

  // The mapping of `voff`, loading its L2 table if needed.
  absl::StatusOr<Mapping> Map(uint64_t voff);
  // Allocator and update.h steps, loading what they need; each appends to
  // `plan`, which the caller then carries out with Apply.
  absl::StatusOr<uint64_t> AllocateCluster(WritePlan& plan);
  // `shared_table`: as update.h's EnsureL2Table (the shared table is
  // loaded into the L2 cache first).
  absl::Status EnsureL2Table(uint64_t voff, WritePlan& plan,
                             uint64_t* shared_table = nullptr);
  absl::Status SetL2Entry(uint64_t voff, uint64_t raw, WritePlan& plan,
                          uint64_t bitmap = 0);
  absl::Status Release(uint64_t host_offset, WritePlan& plan);
  absl::Status ReleaseSharedL2Table(uint64_t table, WritePlan& plan);
  absl::StatusOr<uint64_t> Refcount(uint64_t host_offset);
  // Carries out `plan` in order, with an fdatasync for each barrier.
  absl::Status Apply(const WritePlan& plan);

  // Reads host bytes; past the end of the file they read as zeros.
  absl::Status ReadHost(uint64_t offset, std::span<uint8_t> out) const;
  absl::Status WriteHost(uint64_t offset, std::span<const uint8_t> data);
  // Makes every WriteHost before it durable (HostFile::Sync).
  absl::Status Flush();

  // From now on the file's I/O above goes through `host`, over the same
  // file (a volatile cache's, image/volatile_host_file.h). Not while
  // another thread uses the file.
  void set_host_file(std::shared_ptr<HostFile> host) {
    host_ = std::move(host);
  }

  // Called on every table (L2 table, refcount block) read from the file
  // before it enters a cache, with its offset: an owner that keeps
  // metadata writes back (a journal) lays them over the bytes read.
  using LoadOverlay = std::function<void(uint64_t, std::span<uint8_t>)>;
  void set_load_overlay(LoadOverlay overlay) {
    load_overlay_ = std::move(overlay);
  }

  // Bytes of data clusters the L2 tables name (clipped to the virtual
  // size); with extended L2 entries, of their allocated subclusters.
  absl::StatusOr<uint64_t> AllocatedBytes();

 private:
  // Open; `may_rebuild` false: a dirty image is an error (once rebuilt,
  // the file must no longer be dirty).
  // Open, rebuilding the refcounts of a dirty image only if `may_rebuild`
  // (a file still dirty after its rebuild is an error, not a second one).
  static absl::StatusOr<std::unique_ptr<Qcow2File>> OpenOnce(
      int fd, const std::string& name, bool writable, size_t l2_cache_tables,
      uint64_t l2_cache_bytes, bool may_rebuild, const std::string& snapshot);
  Qcow2File(std::shared_ptr<HostFile> host, bool writable,
            std::unique_ptr<Qcow2Metadata> md)
      : host_(std::move(host)),
        writable_(writable),
        md_(std::move(md)),
        allocator_(*md_) {}
  absl::Status Load(TableCache& cache, uint64_t offset);
  // Counts every cluster the metadata names and makes the refcounts say
  // so, then clears the dirty bit; returns the clusters in use.
  absl::StatusOr<uint64_t> RebuildRefcounts();
  // Runs `step`, one of the core's steps (its answer, or the NeedTable it
  // lacks), loading each table it asks for into `cache`, until it gives an
  // Answer; a bounded number of rounds, then Unavailable.
  template <typename Answer, typename Step>
  absl::StatusOr<Answer> LoadingUntil(TableCache& cache, const char* cache_name,
                                      Step step);

  std::shared_ptr<HostFile> host_;
  const bool writable_;
  std::unique_ptr<Qcow2Metadata> md_;
  ClusterAllocator allocator_;
  LoadOverlay load_overlay_;
  std::vector<Snapshot> snapshots_;
};

}  // namespace pvdisk::image::qcow2

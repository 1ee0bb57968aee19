#include "image/qcow2/qcow2_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/log.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/features.h"
#include "image/qcow2/refcount_rebuild.h"
#include "image/qcow2/subclusters.h"
#include "image/qcow2/table_copy.h"
#include "image/qcow2/update.h"

namespace pvdisk::image::qcow2 {
namespace {

// The header and everything it refers to lie in the first cluster, at most
// 2 MiB.
constexpr uint64_t kHeaderReadBytes = uint64_t{1} << kMaxClusterBits;

}  // namespace

size_t L2CacheTablesFor(const Qcow2Header& header, uint64_t bytes) {
  const uint64_t cluster = header.cluster_size();
  if (bytes == kL2CacheWholeDisk) {
    const uint64_t whole =
        (header.size + header.bytes_per_l2() - 1) / header.bytes_per_l2();
    bytes = std::min(whole * cluster, kMaxDefaultL2CacheBytes);
  }
  return static_cast<size_t>(std::max<uint64_t>(bytes / cluster, 1));
}

absl::StatusOr<std::unique_ptr<Qcow2File>> Qcow2File::Open(
    int fd, const std::string& name, bool writable, size_t l2_cache_tables,
    uint64_t l2_cache_bytes, const std::string& snapshot) {
  if (writable && !snapshot.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": snapshot ", snapshot, " is served read-only, not writable"));
  }
  return OpenOnce(fd, name, writable, l2_cache_tables, l2_cache_bytes,
                  /*may_rebuild=*/true, snapshot);
}

absl::StatusOr<std::unique_ptr<Qcow2File>> Qcow2File::OpenOnce(
    int fd, const std::string& name, bool writable, size_t l2_cache_tables,
    uint64_t l2_cache_bytes, bool may_rebuild, const std::string& snapshot) {
  struct stat st = {};
  if (fstat(fd, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot stat ", name));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::shared_ptr<HostFile> host = MakeFdHostFile(fd, name);
  std::vector<uint8_t> first(std::min(file_size, kHeaderReadBytes));
  if (absl::Status s = host->Read(0, first); !s.ok()) return s;
  absl::StatusOr<Qcow2Header> header = ParseQcow2Header(first, name);
  if (!header.ok()) return header.status();
  // A dirty image is rebuilt below before it is written.
  const bool dirty = (header->incompatible_features & kIncompatDirty) != 0;
  if (writable) {
    if (absl::Status s = CheckIncompatibleFeatures(
            header->incompatible_features & ~kIncompatDirty,
            /*writable=*/true, name);
        !s.ok()) {
      return s;
    }
  }
  // The layout check bounds both tables by the file's size before they are
  // read.
  if (absl::StatusOr<MetadataLayout> layout =
          CheckQcow2Layout(*header, file_size, name);
      !layout.ok()) {
    return layout.status();
  }
  std::vector<uint8_t> l1(uint64_t{header->l1_size} * 8);
  std::vector<uint8_t> refcounts(header->refcount_table_entries() * 8);
  if (absl::Status s = host->Read(header->l1_table_offset, l1); !s.ok()) {
    return s;
  }
  if (absl::Status s = host->Read(header->refcount_table_offset, refcounts);
      !s.ok()) {
    return s;
  }
  if (l2_cache_bytes != 0) {
    l2_cache_tables = L2CacheTablesFor(*header, l2_cache_bytes);
  }
  absl::StatusOr<std::unique_ptr<Qcow2Metadata>> md = BuildQcow2Metadata(
      *header, file_size, l1, refcounts, name, l2_cache_tables);
  if (!md.ok()) return md.status();
  // Checked before anything is written: a table that does not fit the file
  // refuses the image.
  absl::StatusOr<std::vector<Snapshot>> snapshots =
      ReadSnapshotTable(fd, *header, file_size, (*md)->layout, name);
  if (!snapshots.ok()) return snapshots.status();
  if (!snapshot.empty()) {
    absl::StatusOr<Snapshot> chosen = FindSnapshot(*snapshots, snapshot, name);
    if (!chosen.ok()) return chosen.status();
    const Qcow2Header mapped = SnapshotHeader(*header, *chosen);
    std::vector<uint8_t> snapshot_l1(uint64_t{mapped.l1_size} * 8);
    if (absl::Status s = host->Read(mapped.l1_table_offset, snapshot_l1);
        !s.ok()) {
      return s;
    }
    md = BuildQcow2Metadata(mapped, file_size, snapshot_l1, refcounts, name,
                            l2_cache_tables);
    if (!md.ok()) return md.status();
  }
  std::unique_ptr<Qcow2File> file(
      new Qcow2File(std::move(host), writable, std::move(*md)));
  file->snapshots_ = std::move(*snapshots);
  if (writable) {
    // Before the rebuild: refcounts it sets to 0 may be what a bitmap
    // (an autoclear feature) still names.
    if (absl::Status s = file->Apply(ClearAutoclear(*file->md_)); !s.ok()) {
      return s;
    }
  }
  if (writable && dirty) {
    if (!may_rebuild) {
      return absl::DataLossError(
          absl::StrCat(name,
                       ": the dirty bit is still set after its refcounts were "
                       "rebuilt"));
    }
    absl::StatusOr<uint64_t> clusters = file->RebuildRefcounts();
    if (!clusters.ok()) return clusters.status();
    LogInfo("%s: dirty bit set, refcounts rebuilt (%d clusters)", name,
            *clusters);
    // Opened again from the file: the tables as the rebuild left them.
    file.reset();
    return OpenOnce(fd, name, writable, l2_cache_tables, l2_cache_bytes,
                    /*may_rebuild=*/false, snapshot);
  }
  return file;
}

absl::StatusOr<uint64_t> Qcow2File::RebuildRefcounts() {
  absl::StatusOr<RefcountRebuild> rebuild =
      RefcountRebuild::Start(*md_, snapshots_);
  if (!rebuild.ok()) return rebuild.status();
  for (size_t i = 0; i < rebuild->snapshot_l1_tables().size(); ++i) {
    std::vector<uint8_t> l1(rebuild->snapshot_l1_tables()[i].bytes);
    if (absl::Status s = ReadHost(rebuild->snapshot_l1_tables()[i].offset, l1);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = rebuild->CountSnapshotL1Table(i, l1); !s.ok()) {
      return s;
    }
  }
  std::vector<uint8_t> table(md_->cluster_size());
  for (uint64_t offset : rebuild->l2_tables()) {
    if (absl::Status s = ReadHost(offset, table); !s.ok()) return s;
    if (absl::Status s = rebuild->CountL2Table(offset, table); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<WritePlan> plan = rebuild->Plan();
  if (!plan.ok()) return plan.status();
  if (absl::Status s = Apply(*plan); !s.ok()) return s;
  if (absl::Status s = Flush(); !s.ok()) return s;
  return rebuild->clusters_in_use();
}

absl::Status Qcow2File::Load(TableCache& cache, uint64_t offset) {
  std::vector<uint8_t> table(cache.table_bytes());
  if (absl::Status s = ReadHost(offset, table); !s.ok()) return s;
  if (load_overlay_) load_overlay_(offset, table);
  cache.Insert(offset, std::move(table));
  return absl::OkStatus();
}

template <typename Answer, typename Step>
absl::StatusOr<Answer> Qcow2File::LoadingUntil(TableCache& cache,
                                               const char* cache_name,
                                               Step step) {
  // Two rounds usually: the first may load the table, the second finds it
  // (another thread's load could evict it in between; then a third, and so
  // on, up to a bound).
  constexpr int kMaxRounds = 8;
  for (int round = 0; round < kMaxRounds; ++round) {
    auto got = step();
    if (!got.ok()) return got.status();
    if (auto* answer = std::get_if<Answer>(&*got)) return *answer;
    if (absl::Status s = Load(cache, std::get<NeedTable>(*got).offset);
        !s.ok()) {
      return s;
    }
  }
  return absl::UnavailableError(
      absl::StrCat(md_->name, ": the ", cache_name, " keeps evicting a table"));
}

absl::StatusOr<Mapping> Qcow2File::Map(uint64_t voff) {
  return LoadingUntil<Mapping>(md_->l2_cache, "L2 cache",
                               [&] { return MapVirtual(*md_, voff); });
}

absl::StatusOr<uint64_t> Qcow2File::AllocateCluster(WritePlan& plan) {
  absl::StatusOr<Allocated> got =
      LoadingUntil<Allocated>(md_->refblock_cache, "refcount block cache",
                              [&] { return allocator_.Allocate(plan); });
  if (!got.ok()) return got.status();
  return got->host_offset;
}

absl::Status Qcow2File::EnsureL2Table(uint64_t voff, WritePlan& plan,
                                      uint64_t* shared_table) {
  if (shared_table != nullptr) {
    // A shared table is copied from the L2 cache: mapping `voff` loads it.
    if (absl::StatusOr<Mapping> m = Map(voff); !m.ok()) return m.status();
  }
  return LoadingUntil<Done>(md_->refblock_cache, "refcount block cache",
                            [&] {
                              return qcow2::EnsureL2Table(
                                  *md_, allocator_, voff, plan, shared_table);
                            })
      .status();
}

absl::Status Qcow2File::SetL2Entry(uint64_t voff, uint64_t raw, WritePlan& plan,
                                   uint64_t bitmap) {
  return LoadingUntil<Done>(
             md_->l2_cache, "L2 cache",
             [&] { return qcow2::SetL2Entry(*md_, voff, raw, plan, bitmap); })
      .status();
}

absl::Status Qcow2File::Release(uint64_t host_offset, WritePlan& plan) {
  return LoadingUntil<Done>(
             md_->refblock_cache, "refcount block cache",
             [&] { return allocator_.Release(host_offset, plan); })
      .status();
}

absl::Status Qcow2File::ReleaseSharedL2Table(uint64_t table, WritePlan& plan) {
  return LoadingUntil<Done>(md_->refblock_cache, "refcount block cache",
                            [&] {
                              return qcow2::ReleaseSharedL2Table(
                                  *md_, allocator_, table, plan);
                            })
      .status();
}

absl::StatusOr<uint64_t> Qcow2File::Refcount(uint64_t host_offset) {
  return LoadingUntil<uint64_t>(
      md_->refblock_cache, "refcount block cache",
      [&] { return allocator_.Refcount(host_offset); });
}

absl::Status Qcow2File::Apply(const WritePlan& plan) {
  for (const MetadataWrite& w : plan) {
    if (w.barrier_before) {
      if (absl::Status s = Flush(); !s.ok()) return s;
    }
    if (absl::Status s = WriteHost(w.offset, w.bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Qcow2File::ReadHost(uint64_t offset,
                                 std::span<uint8_t> out) const {
  return host_->Read(offset, out);
}

absl::Status Qcow2File::WriteHost(uint64_t offset,
                                  std::span<const uint8_t> data) {
  if (!writable_) {
    return absl::FailedPreconditionError(
        absl::StrCat(md_->name, " is open read-only"));
  }
  if (absl::Status s = host_->Write(offset, data); !s.ok()) return s;
  md_->file_size = std::max(md_->file_size, offset + data.size());
  return absl::OkStatus();
}

absl::Status Qcow2File::Flush() { return host_->Sync(); }

absl::StatusOr<uint64_t> Qcow2File::AllocatedBytes() {
  const Qcow2Header& h = md_->header;
  const uint64_t cluster = h.cluster_size();
  uint64_t total = 0;
  for (uint64_t i = 0; i < md_->l1.size(); ++i) {
    const uint64_t table = md_->L2TableOffset(i);
    if (table == 0) continue;
    std::vector<uint8_t> bytes(cluster);
    if (absl::Status s = ReadHost(table, bytes); !s.ok()) return s;
    for (uint64_t j = 0; j < h.l2_entries(); ++j) {
      const uint64_t voff = (i * h.l2_entries() + j) * cluster;
      if (voff >= h.size) break;
      const uint8_t* entry = bytes.data() + h.l2_entry_bytes() * j;
      const L2Entry e =
          DecodeL2Entry(LoadBe64(entry), h.version, h.extended_l2());
      if (e.kind == L2Kind::kCompressed ||
          (e.kind == L2Kind::kData && !h.extended_l2())) {
        total += std::min(cluster, h.size - voff);
      } else if (e.kind == L2Kind::kData) {
        // The allocated subclusters (subclusters.h), clipped likewise.
        const uint64_t sub = cluster / kSubclusters;
        const uint32_t allocated =
            DecodeSubclusterBitmap(LoadBe64(entry + 8)).allocated;
        for (uint32_t i = 0; i < kSubclusters; ++i) {
          if ((allocated >> i) & 1) {
            total += std::min(sub, h.size - std::min(h.size, voff + i * sub));
          }
        }
      }
    }
  }
  return total;
}

}  // namespace pvdisk::image::qcow2

#include "image/qcow2_state.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/log.h"
#include "image/qcow2/compressed.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/file_io.h"
#include "image/volatile_host_file.h"

namespace pvdisk::image {
namespace {

using qcow2::L2Kind;
using qcow2::Mapping;

// The journal is committed once it holds this many writes or bytes
// (memory bound; a flush commits it anyway).
constexpr size_t kMaxJournalWrites = size_t{1} << 16;
constexpr uint64_t kMaxJournalBytes = uint64_t{64} << 20;
// The file is extended over new clusters this much at a time (at least a
// cluster): one ftruncate per many allocations, not one each.
constexpr uint64_t kExtendStep = uint64_t{4} << 20;

}  // namespace

Qcow2State::Qcow2State(std::unique_ptr<qcow2::ImageChain> chain, bool read_only)
    : chain_(std::move(chain)),
      read_only_(read_only),
      layers_(chain_->layers().size()),
      size_(chain_->size()),
      cluster_size_(chain_->layers().front().qcow2->header().cluster_size()),
      extended_l2_(chain_->layers().front().qcow2->header().extended_l2()),
      file_end_(new std::atomic<uint64_t>[layers_]) {
  // A cluster a discard frees may still be the target of a request mapped
  // before it (a write in place, a read): it is not handed out again while
  // the image is served (the file grows instead; ClusterAllocator).
  top().allocator().set_reuse_freed(false);
  for (size_t i = 0; i < layers_; ++i) {
    const qcow2::ChainLayer& l = chain_->layers()[i];
    file_end_[i].store(l.qcow2 ? l.qcow2->metadata().file_size : l.size);
    if (!l.qcow2) {
      published_.push_back(nullptr);
      continue;
    }
    qcow2::Qcow2Metadata& md = l.qcow2->metadata();
    const uint64_t tables = std::min<uint64_t>(
        md.l1.size(), (md.header.size + md.header.bytes_per_l2() - 1) /
                          md.header.bytes_per_l2());
    if (md.l2_cache.capacity() >= tables && tables > 0) {
      published_.push_back(std::make_unique<qcow2::PublishedMap>(
          md.header.size, tables, md.header.l2_entries(),
          md.header.cluster_size()));
    } else {
      published_.push_back(nullptr);
    }
  }
  disk_end_ = top().metadata().file_size;
  used_end_ = disk_end_;
  // Every cluster the allocator hands out from here on is appended past
  // the end of the file as it is now (freed clusters are not reused).
  fresh_from_ = (disk_end_ + cluster_size_ - 1) / cluster_size_ * cluster_size_;
  // A table read back from the file (after its eviction from a cache) is
  // what the file will hold once the journal is committed.
  top().set_load_overlay([this](uint64_t offset, std::span<uint8_t> table) {
    journal_.Overlay(offset, table);
  });
}

Qcow2State::~Qcow2State() {
  // After a power cut the journal is lost and the file stays as the cut
  // left it.
  if (read_only_ || power_cut()) return;
  if (absl::Status s = Flush(); !s.ok()) {
    LogInfo("%s", s.message());
    return;
  }
  // The file back to its last cluster in use (it was extended ahead).
  if (used_end_ < disk_end_ && ftruncate(chain_->layers().front().fd,
                                         static_cast<off_t>(used_end_)) != 0) {
    LogInfo("%s: cannot trim the file to %d bytes: %s", top().metadata().name,
            used_end_, std::strerror(errno));
  }
}

std::optional<Mapping> Qcow2State::Find(size_t layer, uint64_t voff,
                                        Qcow2Counts& counts) const {
  const qcow2::PublishedMap* map = published_[layer].get();
  if (map == nullptr) return std::nullopt;
  bool from_table = false;
  std::optional<Mapping> m = map->Find(voff, from_table);
  if (m && from_table) ++counts.l2_hits;
  return m;
}

absl::StatusOr<Mapping> Qcow2State::Map(size_t layer, uint64_t voff,
                                        Qcow2Counts& counts) {
  qcow2::Qcow2File& file = *chain_->layers()[layer].qcow2;
  qcow2::Qcow2Metadata& md = file.metadata();
  // Two rounds usually: a miss loads the table, the second round finds it
  // (unless another thread's load evicted it in between: a bounded number
  // of rounds more).
  constexpr int kMaxRounds = 8;
  for (int round = 0; round < kMaxRounds; ++round) {
    absl::StatusOr<qcow2::MapStep> step = qcow2::MapVirtual(md, voff);
    if (!step.ok()) return step.status();
    if (const Mapping* m = std::get_if<Mapping>(&*step)) {
      const bool from_table =
          md.L2TableOffset(voff / md.header.bytes_per_l2()) != 0;
      if (round == 0 && from_table) ++counts.l2_hits;
      // A data cluster is published only when it lies wholly inside the
      // file: a reader of a published mapping does not look at the end;
      // a cluster whose subclusters differ is not published (a word holds
      // one mapping for the whole cluster).
      if (qcow2::PublishedMap* map = published_[layer].get();
          map != nullptr && m->whole_cluster &&
          (m->kind != L2Kind::kData ||
           m->host_cluster + cluster_size_ <= FileEnd(layer))) {
        map->Publish(voff, *m, from_table);
      }
      return *m;
    }
    const uint64_t table = std::get<qcow2::NeedTable>(*step).offset;
    ++counts.l2_misses;
    ++counts.meta_reads;
    std::vector<uint8_t> bytes(md.l2_cache.table_bytes());
    if (absl::Status s = file.ReadHost(table, bytes); !s.ok()) return s;
    if (layer == 0) journal_.Overlay(table, bytes);
    md.l2_cache.Insert(table, std::move(bytes));
  }
  return absl::UnavailableError(
      absl::StrCat(md.name, ": the L2 cache keeps evicting a table"));
}

absl::StatusOr<Mapping> Qcow2State::MapShared(size_t layer, uint64_t voff,
                                              Qcow2Counts& counts) {
  if (std::optional<Mapping> m = Find(layer, voff, counts)) return *m;
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return Map(layer, voff, counts);
}

absl::Status Qcow2State::ReadFileBytes(size_t layer, uint64_t offset,
                                       std::span<uint8_t> out) {
  const qcow2::ChainLayer& l = chain_->layers()[layer];
  if (l.qcow2) return l.qcow2->ReadHost(offset, out);
  return qcow2::ReadFully(l.fd, offset, out, l.path);
}

void Qcow2State::UseVolatileCache(std::shared_ptr<io::VolatileCache> cache) {
  const qcow2::ChainLayer& l = chain_->layers().front();
  top().set_host_file(MakeVolatileHostFile(cache, l.fd, l.path));
  cache_ = std::move(cache);
}

absl::Status Qcow2State::CheckPowerLocked() {
  if (!power_cut()) return absl::OkStatus();
  if (!journal_.empty()) (void)journal_.Take();
  return ErrnoError(EIO,
                    absl::StrCat(top().metadata().name, " has lost its power"));
}

void Qcow2State::GrowFileEnd(uint64_t end) {
  qcow2::Qcow2Metadata& md = top().metadata();
  md.file_size = std::max(md.file_size, end);
  file_end_[0].store(md.file_size, std::memory_order_release);
}

absl::Status Qcow2State::Journal(const qcow2::WritePlan& plan,
                                 Qcow2Counts& counts) {
  journal_.Add(plan);
  for (const qcow2::MetadataWrite& w : plan) {
    GrowFileEnd(w.offset + w.bytes.size());
  }
  if (journal_.writes() < kMaxJournalWrites &&
      journal_.bytes() < kMaxJournalBytes) {
    return absl::OkStatus();
  }
  return CommitLocked(counts);
}

absl::Status Qcow2State::CommitLocked(Qcow2Counts& counts) {
  if (absl::Status s = CheckPowerLocked(); !s.ok()) return s;
  if (!commit_failed_.ok()) return commit_failed_;
  if (journal_.empty()) return absl::OkStatus();
  std::vector<qcow2::MetadataJournal::Stage> stages = journal_.Take();
  absl::Status status;
  for (size_t s = 0; s < stages.size() && status.ok(); ++s) {
    if (s > 0) status = top().Flush();
    for (const qcow2::MetadataWrite& w :
         qcow2::Coalesce(std::move(stages[s]))) {
      if (!status.ok()) break;
      status = top().WriteHost(w.offset, w.bytes);
      ++counts.meta_writes;
      disk_end_ = std::max(disk_end_, w.offset + w.bytes.size());
      used_end_ = std::max(used_end_, w.offset + w.bytes.size());
    }
  }
  if (!status.ok()) {
    commit_failed_ = absl::DataLossError(
        absl::StrCat(top().metadata().name,
                     ": metadata could not be written: ", status.message()));
    return commit_failed_;
  }
  return absl::OkStatus();
}

absl::Status Qcow2State::Commit(Qcow2Counts& counts) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  return CommitLocked(counts);
}

absl::Status Qcow2State::Flush() {
  // After a power cut there is nothing left to make durable: the cut
  // decided what the file holds.
  if (read_only_ || power_cut()) return absl::OkStatus();
  Qcow2Counts counts;
  if (absl::Status s = Commit(counts); !s.ok()) return s;
  return top().Flush();
}

absl::StatusOr<std::optional<uint64_t>> Qcow2State::WriteAllocating(
    uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  return WriteAllocatingLocked(voff, data, counts);
}

absl::StatusOr<std::optional<uint64_t>> Qcow2State::WriteAllocatingLocked(
    uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts) {
  if (absl::Status s = CheckPowerLocked(); !s.ok()) return s;
  if (!commit_failed_.ok()) return commit_failed_;
  if (extended_l2_) return WriteSubclustersLocked(voff, data, counts);
  absl::StatusOr<Mapping> m = Map(0, voff, counts);
  if (!m.ok()) return m.status();
  if (m->kind == L2Kind::kData && m->writable_in_place) {
    return std::optional<uint64_t>(m->host_offset);
  }
  const uint64_t cluster = cluster_size_;
  const uint64_t within = voff % cluster;
  const uint64_t start = voff - within;
  const uint64_t virtual_bytes = std::min(cluster, size_ - start);

  journal_.Begin();
  absl::StatusOr<uint64_t> host = AllocateClusterLocked(voff, counts);
  if (!host.ok()) return host.status();
  // Where the cluster's bytes outside `data` read as zeros now, a new
  // cluster (a hole) needs only `data` written.
  const bool reads_zero = m->kind == L2Kind::kZero ||
                          (m->kind == L2Kind::kUnallocated && layers_ == 1);
  const bool fresh = reads_zero && *host >= fresh_from_;
  if (!fresh) {
    std::vector<uint8_t> buffer(cluster, 0);
    if (within != 0 || data.size() < virtual_bytes) {
      // Copy on write: what the write does not cover comes from where the
      // cluster's bytes are now.
      std::span<uint8_t> old(buffer.data(), virtual_bytes);
      if (m->kind == L2Kind::kUnallocated) {
        if (absl::Status s = chain_->Read(start, old, 1); !s.ok()) return s;
      } else if (m->kind == L2Kind::kData) {
        if (absl::Status s = top().ReadHost(m->host_cluster, old); !s.ok()) {
          return s;
        }
      } else if (m->kind == L2Kind::kCompressed) {
        std::vector<uint8_t> scratch;
        if (absl::Status s = chain_->ReadCompressed(0, *m, scratch, buffer);
            !s.ok()) {
          return s;
        }
      }
      counts.cow_bytes += virtual_bytes - data.size();
    }
    std::memcpy(buffer.data() + within, data.data(), data.size());
    if (absl::Status s = top().WriteHost(*host, buffer); !s.ok()) return s;
  }
  // The barrier SetL2Entry puts first puts the entry in a later stage than
  // the refcount and the new table: the commit's flush between them also
  // makes the data durable before the entry names the cluster.
  qcow2::WritePlan plan;
  absl::Status set = top().SetL2Entry(voff, qcow2::EncodeL2Data(*host), plan);
  if (published_[0]) published_[0]->Withdraw(voff);
  if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
  if (!set.ok()) return set;
  // The entry named another cluster (shared with a snapshot, a
  // preallocated zero cluster, or compressed data): one reference less,
  // in a later stage.
  if (absl::Status s = ReleaseNamed(*m, counts); !s.ok()) return s;
  if (fresh) return std::optional<uint64_t>(*host + within);
  return std::optional<uint64_t>();
}

absl::StatusOr<uint64_t> Qcow2State::AllocateClusterLocked(
    uint64_t voff, Qcow2Counts& counts) {
  const uint64_t cluster = cluster_size_;
  qcow2::WritePlan plan;
  uint64_t shared_table = 0;
  absl::Status ensured = top().EnsureL2Table(voff, plan, &shared_table);
  absl::StatusOr<uint64_t> host = ensured.ok()
                                      ? top().AllocateCluster(plan)
                                      : absl::StatusOr<uint64_t>(ensured);
  if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
  if (absl::Status s = ReleaseSharedTable(shared_table, counts); !s.ok()) {
    return s;
  }
  if (!host.ok()) return host.status();
  ++counts.clusters_allocated;

  // The file extends over the new cluster: a hole, reading zeros, unless
  // written (extended a step ahead, trimmed back when the state ends).
  used_end_ = std::max(used_end_, *host + cluster);
  if (*host + cluster > disk_end_) {
    const uint64_t end =
        std::max(*host + cluster, disk_end_ + kExtendStep) / cluster * cluster;
    const int fd = chain_->layers().front().fd;
    if (ftruncate(fd, static_cast<off_t>(end)) != 0) {
      return ErrnoError(errno,
                        absl::StrCat("cannot extend ", top().metadata().name));
    }
    disk_end_ = end;
  }
  GrowFileEnd(*host + cluster);
  return *host;
}

absl::Status Qcow2State::ReleaseNamed(const Mapping& m, Qcow2Counts& counts) {
  std::vector<uint64_t> clusters;
  if (m.kind == L2Kind::kCompressed) {
    clusters = qcow2::CompressedHostClusters(
        qcow2::CompressedExtent{m.host_offset, m.compressed_bytes},
        cluster_size_);
  } else if (m.host_cluster != 0) {
    clusters.push_back(m.host_cluster);
  }
  for (uint64_t c : clusters) {
    if (absl::Status s = ReleaseCluster(c, counts); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Qcow2State::ReleaseCluster(uint64_t host_cluster,
                                        Qcow2Counts& counts) {
  qcow2::WritePlan plan;
  absl::Status released = top().Release(host_cluster, plan);
  if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
  return released;
}

absl::Status Qcow2State::ReleaseSharedTable(uint64_t table,
                                            Qcow2Counts& counts) {
  if (table == 0) return absl::OkStatus();
  qcow2::WritePlan plan;
  absl::Status released = top().ReleaseSharedL2Table(table, plan);
  if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
  return released;
}

absl::Status Qcow2State::Deallocate(io::IoOp op, uint64_t voff, uint64_t length,
                                    Qcow2Counts& counts) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (absl::Status s = CheckPowerLocked(); !s.ok()) return s;
  if (!commit_failed_.ok()) return commit_failed_;
  if (extended_l2_) {
    return DeallocateSubclustersLocked(op, voff, length, counts);
  }
  absl::StatusOr<Mapping> m = Map(0, voff, counts);
  if (!m.ok()) return m.status();
  const uint64_t cluster = cluster_size_;
  const uint64_t within = voff % cluster;
  const uint64_t virtual_bytes = std::min(cluster, size_ - (voff - within));
  const bool backing = layers_ > 1;
  const bool v3 = top().header().version >= 3;
  const bool whole = within == 0 && length >= virtual_bytes;
  if (whole && (v3 || !backing)) {
    // A zero cluster where a backing file would show through (or where
    // zeroes were asked for); unallocated otherwise.
    const uint64_t entry =
        v3 && (backing || op == io::IoOp::kWriteZeroes) ? qcow2::kL2Zero : 0;
    if ((entry == 0 && m->kind == L2Kind::kUnallocated) ||
        (entry != 0 && m->kind == L2Kind::kZero && m->host_cluster == 0)) {
      return absl::OkStatus();
    }
    journal_.Begin();
    qcow2::WritePlan plan;
    uint64_t shared_table = 0;
    absl::Status set = top().EnsureL2Table(voff, plan, &shared_table);
    if (set.ok()) set = top().SetL2Entry(voff, entry, plan);
    if (published_[0]) published_[0]->Withdraw(voff);
    if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
    if (absl::Status s = ReleaseSharedTable(shared_table, counts); !s.ok()) {
      return s;
    }
    if (!set.ok()) return set;
    return ReleaseNamed(*m, counts);
  }
  // Part of a cluster (or a version 2 image over a backing file): zeros
  // written, unless the range reads as zeros already.
  if (m->kind == L2Kind::kZero ||
      (m->kind == L2Kind::kUnallocated && !backing)) {
    return absl::OkStatus();
  }
  const std::vector<uint8_t> zeros(length, 0);
  absl::StatusOr<std::optional<uint64_t>> written =
      WriteAllocatingLocked(voff, zeros, counts);
  if (!written.ok()) return written.status();
  if (!written->has_value()) return absl::OkStatus();
  return top().WriteHost(**written, zeros);
}

}  // namespace pvdisk::image

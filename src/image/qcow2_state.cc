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
#include "image/qcow2/entries.h"

namespace pvdisk::image {

using qcow2::L2Kind;
using qcow2::Mapping;

Qcow2State::Qcow2State(std::unique_ptr<qcow2::ImageChain> chain, bool read_only)
    : chain_(std::move(chain)),
      read_only_(read_only),
      layers_(chain_->layers().size()),
      size_(chain_->size()),
      cluster_size_(chain_->layers().front().qcow2->header().cluster_size()) {
  // A cluster a discard frees may still be the target of a request mapped
  // before it (a write in place, a read): it is not handed out again while
  // the image is served (the file grows instead; ClusterAllocator).
  top().allocator().set_reuse_freed(false);
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
      if (round == 0 &&
          md.L2TableOffset(voff / md.header.bytes_per_l2()) != 0) {
        ++counts.l2_hits;
      }
      return *m;
    }
    const uint64_t table = std::get<qcow2::NeedTable>(*step).offset;
    ++counts.l2_misses;
    ++counts.meta_reads;
    std::vector<uint8_t> bytes(md.l2_cache.table_bytes());
    if (absl::Status s = file.ReadHost(table, bytes); !s.ok()) return s;
    md.l2_cache.Insert(table, std::move(bytes));
  }
  return absl::UnavailableError(
      absl::StrCat(md.name, ": the L2 cache keeps evicting a table"));
}

uint64_t Qcow2State::FileEnd(size_t layer) const {
  const qcow2::ChainLayer& l = chain_->layers()[layer];
  return l.qcow2 ? l.qcow2->metadata().file_size : l.size;
}

absl::Status Qcow2State::Apply(const qcow2::WritePlan& plan,
                               Qcow2Counts& counts) {
  counts.meta_writes += plan.size();
  return top().Apply(plan);
}

absl::StatusOr<std::optional<uint64_t>> Qcow2State::WriteAllocating(
    uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  return WriteAllocatingLocked(voff, data, counts);
}

absl::StatusOr<std::optional<uint64_t>> Qcow2State::WriteAllocatingLocked(
    uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts) {
  absl::StatusOr<Mapping> m = Map(0, voff, counts);
  if (!m.ok()) return m.status();
  if (m->kind == L2Kind::kData && m->writable_in_place) {
    return std::optional<uint64_t>(m->host_offset);
  }
  if (m->kind == L2Kind::kCompressed) {
    return absl::DataLossError(absl::StrCat(top().metadata().name,
                                            ": virtual offset ", voff,
                                            " is in a compressed cluster"));
  }
  const uint64_t cluster = cluster_size_;
  const uint64_t within = voff % cluster;
  const uint64_t start = voff - within;
  const uint64_t virtual_bytes = std::min(cluster, size_ - start);
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
    }
    counts.cow_bytes += virtual_bytes - data.size();
  }
  std::memcpy(buffer.data() + within, data.data(), data.size());

  qcow2::WritePlan plan;
  absl::Status ensured = top().EnsureL2Table(voff, plan);
  absl::StatusOr<uint64_t> host = ensured.ok()
                                      ? top().AllocateCluster(plan)
                                      : absl::StatusOr<uint64_t>(ensured);
  if (absl::Status s = Apply(plan, counts); !s.ok()) return s;
  if (!host.ok()) return host.status();
  ++counts.clusters_allocated;
  if (absl::Status s = top().WriteHost(*host, buffer); !s.ok()) return s;
  // The barrier SetL2Entry puts first makes the refcount, the new table
  // and the data durable before the entry names the cluster.
  plan.clear();
  absl::Status set = top().SetL2Entry(voff, qcow2::EncodeL2Data(*host), plan);
  if (absl::Status s = Apply(plan, counts); !s.ok()) return s;
  if (!set.ok()) return set;
  if (m->host_cluster != 0) {
    // The entry named another cluster (shared with a snapshot, or a
    // preallocated zero cluster): one reference less, after the barrier.
    plan.clear();
    absl::Status released = top().Release(m->host_cluster, plan);
    if (absl::Status s = Apply(plan, counts); !s.ok()) return s;
    if (!released.ok()) return released;
  }
  return std::optional<uint64_t>();
}

absl::Status Qcow2State::Deallocate(io::IoOp op, uint64_t voff, uint64_t length,
                                    Qcow2Counts& counts) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
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
    qcow2::WritePlan plan;
    absl::Status set = top().EnsureL2Table(voff, plan);
    if (set.ok()) set = top().SetL2Entry(voff, entry, plan);
    if (absl::Status s = Apply(plan, counts); !s.ok()) return s;
    if (!set.ok()) return set;
    if (m->host_cluster == 0) return absl::OkStatus();
    plan.clear();
    absl::Status released = top().Release(m->host_cluster, plan);
    if (absl::Status s = Apply(plan, counts); !s.ok()) return s;
    return released;
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

absl::Status Qcow2State::Flush() {
  if (read_only_) return absl::OkStatus();
  return top().Flush();
}

}  // namespace pvdisk::image

// Qcow2State's metadata steps for a top layer with extended L2 entries
// (qcow2/subclusters.h): writes and deallocations by subcluster.
//
// A write allocates the host cluster if the entry names none (or names one
// that cannot be written in place: shared with a snapshot, or compressed
// data), and fills only the subclusters it touches: the parts of its first
// and last subcluster it does not cover are copied from what they read as
// now (the backing file, zeros, or the host cluster), and their allocated
// bits are set (zero bits cleared). A write that covers whole subclusters
// copies nothing. A new cluster that replaces compressed data or a shared
// cluster is written whole, so every subcluster the old one held stays.
//
// A discard or write of zeroes sets the zero bits of the subclusters it
// covers whole (a discard without a backing file makes them unallocated
// instead) and writes zeros into the parts of subclusters at its edges;
// once no subcluster is allocated, the entry stops naming its host
// cluster, which is given back in a later stage.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/subclusters.h"
#include "image/qcow2_state.h"

namespace pvdisk::image {
namespace {

using qcow2::L2Kind;
using qcow2::Mapping;
using qcow2::SubclusterBitmap;

struct ExtendedEntry {
  uint64_t raw = 0;
  uint64_t bitmap = 0;
};

// The extended entry that maps `voff` in `md` (all zero without an L2
// table). Unavailable when its table is not in the cache: the caller
// mapped `voff` just before, under the state's lock, so that means the
// cache evicted a table in use.
absl::StatusOr<ExtendedEntry> ReadEntry(qcow2::Qcow2Metadata& md,
                                        uint64_t voff) {
  const qcow2::Qcow2Header& h = md.header;
  const uint64_t table = md.L2TableOffset(voff / h.bytes_per_l2());
  if (table == 0) return ExtendedEntry{};
  const uint64_t index = (voff / h.cluster_size()) % h.l2_entries();
  ExtendedEntry e;
  if (!md.l2_cache.Access(table, [&](std::span<uint8_t> t) {
        e.raw = qcow2::LoadBe64(t.data() + 16 * index);
        e.bitmap = qcow2::LoadBe64(t.data() + 16 * index + 8);
      })) {
    return absl::UnavailableError(
        absl::StrCat(md.name, ": the L2 cache evicted a table in use"));
  }
  return e;
}

}  // namespace

absl::StatusOr<std::optional<uint64_t>> Qcow2State::WriteSubclustersLocked(
    uint64_t voff, std::span<const uint8_t> data, Qcow2Counts& counts) {
  // Map loads the table and refuses an invalid entry.
  absl::StatusOr<Mapping> m = Map(0, voff, counts);
  if (!m.ok()) return m.status();
  if (m->kind == L2Kind::kData && m->writable_in_place &&
      m->bytes >= data.size()) {
    return std::optional<uint64_t>(m->host_offset);
  }
  qcow2::Qcow2Metadata& md = top().metadata();
  absl::StatusOr<ExtendedEntry> entry = ReadEntry(md, voff);
  if (!entry.ok()) return entry.status();
  const uint64_t cluster = cluster_size_;
  const uint64_t sub = cluster / qcow2::kSubclusters;
  const uint64_t within = voff % cluster;
  const uint64_t start = voff - within;
  const uint64_t virtual_bytes = std::min(cluster, size_ - start);
  const qcow2::L2Entry old =
      qcow2::DecodeL2Entry(entry->raw, md.header.version, /*extended=*/true);
  const SubclusterBitmap bits = qcow2::DecodeSubclusterBitmap(entry->bitmap);
  const bool compressed = old.kind == L2Kind::kCompressed;
  const uint64_t l1_index = voff / md.header.bytes_per_l2();
  const bool in_place = !compressed && old.host_offset != 0 && old.copied &&
                        (md.l1[l1_index] & qcow2::kCopied) != 0;
  // A new cluster in place of one that held data is written whole.
  const bool whole = compressed || (!in_place && old.host_offset != 0);

  const uint32_t first = static_cast<uint32_t>(within / sub);
  const uint32_t end =
      static_cast<uint32_t>((within + data.size() + sub - 1) / sub);
  const uint32_t touched = qcow2::SubclusterMask(first, end);
  SubclusterBitmap next{bits.allocated | touched, bits.zero & ~touched};
  if (compressed) next = {~0u, 0};

  journal_.Begin();
  uint64_t host = old.host_offset;
  if (!in_place) {
    absl::StatusOr<uint64_t> got = AllocateClusterLocked(voff, counts);
    if (!got.ok()) return got.status();
    host = *got;
  }

  // The bytes of the cluster written to `host`: [lo, hi).
  const uint64_t lo = whole ? 0 : first * sub;
  const uint64_t hi =
      whole ? virtual_bytes : std::min<uint64_t>(end * sub, virtual_bytes);
  // The request's bytes are all there is to write, and until they land
  // the subclusters read as they did before (zeros, from a cluster never
  // written): the engine writes them, asynchronously. A write still in
  // flight when a commit makes the entry durable then leaves what was
  // there before, as with whole clusters (qcow2_state.h).
  const bool only_data = lo == within && hi == within + data.size();
  const uint32_t reads_zero = bits.zero | (layers_ == 1 ? ~bits.allocated : 0);
  const bool read_zero = (reads_zero & touched) == touched;
  const bool async =
      only_data && !in_place && !whole && read_zero && host >= fresh_from_;
  if (!async && only_data) {
    // Nothing to copy: the request's bytes go straight to the file.
    if (absl::Status s = top().WriteHost(host + lo, data); !s.ok()) return s;
  } else if (!async) {
    std::vector<uint8_t> buffer(hi - lo, 0);
    std::vector<uint8_t> inflated;
    if (compressed) {
      inflated.resize(cluster);
      std::vector<uint8_t> scratch;
      if (absl::Status s = chain_->ReadCompressed(0, *m, scratch, inflated);
          !s.ok()) {
        return s;
      }
    }
    // What byte range [a, b) of the cluster reads as now, into the buffer,
    // for the subclusters the new entry holds as allocated.
    auto fill = [&](uint64_t a, uint64_t b) -> absl::Status {
      while (a < b) {
        const uint32_t i = static_cast<uint32_t>(a / sub);
        const uint64_t n = std::min(b, (i + 1) * sub) - a;
        std::span<uint8_t> to(buffer.data() + (a - lo), n);
        const uint32_t bit = 1u << i;
        if ((next.allocated & bit) == 0) {
          // Not held by the new cluster: its bytes are never read.
        } else if (compressed) {
          std::memcpy(to.data(), inflated.data() + a, n);
        } else if (bits.allocated & bit) {
          if (absl::Status s = top().ReadHost(old.host_offset + a, to);
              !s.ok()) {
            return s;
          }
          if (!in_place) counts.cow_bytes += n;  // else rewritten in place
        } else if ((bits.zero & bit) == 0 && layers_ > 1) {
          if (absl::Status s = chain_->Read(start + a, to, 1); !s.ok()) {
            return s;
          }
          counts.cow_bytes += n;
        }
        a += n;
      }
      return absl::OkStatus();
    };
    if (absl::Status s = fill(lo, within); !s.ok()) return s;
    if (absl::Status s = fill(within + data.size(), hi); !s.ok()) return s;
    std::memcpy(buffer.data() + (within - lo), data.data(), data.size());
    if (absl::Status s = top().WriteHost(host + lo, buffer); !s.ok()) {
      return s;
    }
  }
  // The entry in a later stage than the refcount (a barrier first); the
  // commit's flush between them makes the data durable before the entry
  // names it.
  qcow2::WritePlan plan;
  absl::Status set = top().SetL2Entry(voff, qcow2::EncodeL2Data(host), plan,
                                      qcow2::EncodeSubclusterBitmap(next));
  if (published_[0]) published_[0]->Withdraw(voff);
  if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
  if (!set.ok()) return set;
  if (!in_place) {
    if (absl::Status s = ReleaseNamed(*m, counts); !s.ok()) return s;
  }
  if (async) return std::optional<uint64_t>(host + within);
  return std::optional<uint64_t>();
}

absl::Status Qcow2State::DeallocateSubclustersLocked(io::IoOp op, uint64_t voff,
                                                     uint64_t length,
                                                     Qcow2Counts& counts) {
  absl::StatusOr<Mapping> m = Map(0, voff, counts);
  if (!m.ok()) return m.status();
  qcow2::Qcow2Metadata& md = top().metadata();
  absl::StatusOr<ExtendedEntry> entry = ReadEntry(md, voff);
  if (!entry.ok()) return entry.status();
  const uint64_t cluster = cluster_size_;
  const uint64_t sub = cluster / qcow2::kSubclusters;
  const uint64_t within = voff % cluster;
  const uint64_t virtual_bytes = std::min(cluster, size_ - (voff - within));
  const bool backing = layers_ > 1;
  const qcow2::L2Entry old =
      qcow2::DecodeL2Entry(entry->raw, md.header.version, /*extended=*/true);
  const SubclusterBitmap bits = qcow2::DecodeSubclusterBitmap(entry->bitmap);

  // The subclusters covered whole (the last one of the disk may be cut
  // short by its end), and the parts at the edges.
  const uint64_t stop = within + length;
  const uint32_t first = static_cast<uint32_t>((within + sub - 1) / sub);
  const uint32_t end = stop >= virtual_bytes
                           ? qcow2::kSubclusters
                           : static_cast<uint32_t>(stop / sub);
  const bool compressed = old.kind == L2Kind::kCompressed;
  const bool whole_cluster = first == 0 && end == qcow2::kSubclusters;
  if (first < end && (!compressed || whole_cluster)) {
    const uint32_t covered = qcow2::SubclusterMask(first, end);
    // Zero bits where a backing file would show through or zeroes were
    // asked for; unallocated otherwise.
    const bool zero = backing || op == io::IoOp::kWriteZeroes;
    SubclusterBitmap next{
        compressed ? 0u : bits.allocated & ~covered,
        zero ? (bits.zero | covered) : (bits.zero & ~covered)};
    // No subcluster left allocated: the entry names no host cluster.
    const bool drop =
        next.allocated == 0 && (old.host_offset != 0 || compressed);
    const uint64_t raw = drop ? 0 : entry->raw;
    const uint64_t bitmap = qcow2::EncodeSubclusterBitmap(next);
    if (raw != entry->raw || bitmap != entry->bitmap) {
      journal_.Begin();
      qcow2::WritePlan plan;
      uint64_t shared_table = 0;
      absl::Status set = top().EnsureL2Table(voff, plan, &shared_table);
      if (set.ok()) set = top().SetL2Entry(voff, raw, plan, bitmap);
      if (published_[0]) published_[0]->Withdraw(voff);
      if (absl::Status s = Journal(plan, counts); !s.ok()) return s;
      if (absl::Status s = ReleaseSharedTable(shared_table, counts); !s.ok()) {
        return s;
      }
      if (!set.ok()) return set;
      if (drop) {
        if (absl::Status s = ReleaseNamed(*m, counts); !s.ok()) return s;
      }
    }
  }
  // The rest gets zeros written (a compressed cluster is made a normal one
  // first), unless it reads as zeros already.
  auto zero_range = [&](uint64_t a, uint64_t b) -> absl::Status {
    if (a >= b) return absl::OkStatus();
    if (!compressed) {
      const uint32_t i = static_cast<uint32_t>(a / sub);
      const uint32_t bit = 1u << i;
      const bool reads_zero =
          (bits.zero & bit) != 0 || ((bits.allocated & bit) == 0 && !backing);
      if (reads_zero && (b - 1) / sub == i) return absl::OkStatus();
    }
    const std::vector<uint8_t> zeros(b - a, 0);
    absl::StatusOr<std::optional<uint64_t>> written =
        WriteSubclustersLocked(voff - within + a, zeros, counts);
    if (!written.ok()) return written.status();
    if (!written->has_value()) return absl::OkStatus();
    return top().WriteHost(**written, zeros);
  };
  if (first >= end || (compressed && !whole_cluster)) {
    return zero_range(within, stop);
  }
  if (absl::Status s =
          zero_range(within, std::min<uint64_t>(first * sub, stop));
      !s.ok()) {
    return s;
  }
  return zero_range(std::max<uint64_t>(end * sub, within), stop);
}

}  // namespace pvdisk::image

// Fuzzes the qcow2 core (src/image/qcow2/) with the input as an image file:
// the header and its extensions are parsed, the layout checked, the L1 and
// refcount tables built, the refcounts counted anew as for a dirty image
// with the snapshots' tables (the plan checked: it writes inside the file
// or appends whole clusters, and clears the dirty bit last), every cluster of
// the disk mapped (tables loaded from the input as the mapper asks for them),
// the snapshot table parsed and each usable snapshot's disk mapped through its
// own L1 table, and then clusters allocated and named by L2 entries (an L2
// table shared with a snapshot copied first), with the write plans carried out
// on the in-memory file. Properties: no crash or undefined behaviour; a refusal
// is InvalidArgument (header, layout) or DataLoss (a range); a data
// mapping lies inside the file, aligned, clear of metadata; a compressed
// cluster's data starts inside the file and inflates into exactly one
// cluster or is refused with DataLoss; with extended L2 entries a mapping
// ends at a subcluster boundary (or the disk's end) and an invalid bitmap
// is refused with DataLoss; a snapshot table is refused only with
// InvalidArgument, and a snapshot it calls usable has its L1 table inside
// the file; a copied L2 table is named with the copied flag; an allocated
// cluster maps back where it was put and has refcount 1.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <variant>
#include <vector>

#include "fuzz_input.h"
#include "image/qcow2/allocator.h"
#include "image/qcow2/compressed.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/features.h"
#include "image/qcow2/header.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/refcount_rebuild.h"
#include "image/qcow2/snapshot_table.h"
#include "image/qcow2/subclusters.h"
#include "image/qcow2/table_copy.h"
#include "image/qcow2/update.h"

namespace {

using namespace pvdisk::image::qcow2;

// The most a file grows to (plans and data clusters past its end).
constexpr uint64_t kMaxFileBytes = uint64_t{8} << 20;

// The image file, growing as plans write past its end (bounded). Its bytes
// live in one buffer of kMaxFileBytes kept from input to input: a buffer
// of its own for each would be mapped, faulted in and unmapped each time,
// which cost more than everything the input exercises.
struct File {
  std::vector<uint8_t>& bytes;
  std::vector<uint8_t> Read(uint64_t offset, uint64_t length) const {
    std::vector<uint8_t> out(length, 0);
    if (length > 0 && offset < bytes.size()) {
      const uint64_t n = std::min<uint64_t>(length, bytes.size() - offset);
      std::memcpy(out.data(), bytes.data() + offset, n);
    }
    return out;
  }
  bool Write(uint64_t offset, const std::vector<uint8_t>& data) {
    if (offset > kMaxFileBytes || offset + data.size() > kMaxFileBytes) {
      return false;
    }
    if (data.empty()) return true;
    if (bytes.size() < offset + data.size()) bytes.resize(offset + data.size());
    std::memcpy(bytes.data() + offset, data.data(), data.size());
    return true;
  }
};

// Carries out a plan; false if it would grow the file past the bound.
bool Apply(File& file, Qcow2Metadata& md, const WritePlan& plan) {
  for (const MetadataWrite& w : plan) {
    if (!file.Write(w.offset, w.bytes)) return false;
    md.file_size = std::max<uint64_t>(md.file_size, w.offset + w.bytes.size());
  }
  return true;
}

// Maps `voff`, loading L2 tables from the file; checks what comes back.
absl::StatusOr<Mapping> Map(Qcow2Metadata& md, const File& file,
                            uint64_t voff) {
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<MapStep> step = MapVirtual(md, voff);
    if (!step.ok()) {
      FUZZ_CHECK(absl::IsDataLoss(step.status()),
                 "a range refused with a code other than DataLoss");
      return step.status();
    }
    if (auto* m = std::get_if<Mapping>(&*step)) {
      const uint64_t cluster = md.cluster_size();
      FUZZ_CHECK(m->bytes > 0 && m->bytes <= cluster,
                 "a mapping longer than a cluster");
      FUZZ_CHECK(voff + m->bytes <= md.header.size,
                 "a mapping past the virtual size");
      if (md.header.extended_l2()) {
        const uint64_t end = voff + m->bytes;
        FUZZ_CHECK(end % (cluster / kSubclusters) == 0 || end == md.header.size,
                   "a subcluster mapping that ends inside a subcluster");
        FUZZ_CHECK(
            !m->whole_cluster || m->bytes == std::min(cluster - voff % cluster,
                                                      md.header.size - voff),
            "a mapping for the whole cluster that ends before it");
      }
      if (m->kind == L2Kind::kData) {
        FUZZ_CHECK(m->host_cluster % cluster == 0, "an unaligned data cluster");
        FUZZ_CHECK(m->host_cluster < md.file_size,
                   "a data cluster past the end of the file");
        FUZZ_CHECK(!md.layout.Overlap(m->host_cluster, cluster).has_value(),
                   "a data cluster inside metadata");
        FUZZ_CHECK(m->host_offset == m->host_cluster + voff % cluster,
                   "the host offset is not the virtual offset's place");
      }
      if (m->kind == L2Kind::kCompressed) {
        FUZZ_CHECK(m->host_offset < md.file_size && m->compressed_bytes > 0,
                   "compressed data outside the file");
        std::vector<uint8_t> scratch;
        std::vector<uint8_t> out(cluster + 1, 0x5c);
        absl::Status s = ReadCompressedCluster(
            md.name, md.header.compression_type,
            {m->host_offset, m->compressed_bytes},
            [&](uint64_t offset, std::span<uint8_t> into) {
              std::vector<uint8_t> b = file.Read(offset, into.size());
              std::memcpy(into.data(), b.data(), b.size());
              return absl::OkStatus();
            },
            scratch, std::span<uint8_t>(out).first(cluster));
        FUZZ_CHECK(s.ok() || absl::IsDataLoss(s),
                   "compressed data refused with a code other than DataLoss");
        FUZZ_CHECK(out[cluster] == 0x5c, "inflated past the cluster");
      }
      return *m;
    }
    const uint64_t table = std::get<NeedTable>(*step).offset;
    FUZZ_CHECK(md.layout.Overlap(table, 1) == Region::kL2Table,
               "asked for an L2 table the layout does not hold");
    md.l2_cache.Insert(table, file.Read(table, md.cluster_size()));
  }
  FUZZ_CHECK(false, "the mapper asked for a table it was given");
  return absl::InternalError("unreachable");
}

template <typename Step>
auto Drive(Qcow2Metadata& md, const File& file, Step step) -> decltype(step()) {
  for (int round = 0;; ++round) {
    auto got = step();
    if (!got.ok() || round == 4) return got;
    bool loaded = false;
    std::visit(
        [&](auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, NeedTable>) {
            TableCache& cache =
                md.layout.Overlap(v.offset, 1) == Region::kL2Table
                    ? md.l2_cache
                    : md.refblock_cache;
            cache.Insert(v.offset, file.Read(v.offset, md.cluster_size()));
            loaded = true;
          }
        },
        *got);
    if (!loaded) return got;
  }
}

// Counts the refcounts anew, as a writable open of a dirty image does, and
// checks the plan (not carried out: the rest runs on the file as it is).
void Rebuild(const Qcow2Metadata& md, const File& file,
             const std::vector<Snapshot>& snapshots) {
  absl::StatusOr<RefcountRebuild> rebuild =
      RefcountRebuild::Start(md, snapshots);
  if (!rebuild.ok()) {
    FUZZ_CHECK(absl::IsFailedPrecondition(rebuild.status()),
               "a rebuild refused with a code other than FailedPrecondition");
    return;
  }
  const uint64_t cluster = md.cluster_size();
  for (size_t i = 0; i < rebuild->snapshot_l1_tables().size(); ++i) {
    const RefcountRebuild::TableBytes t = rebuild->snapshot_l1_tables()[i];
    FUZZ_CHECK(t.offset + t.bytes <= md.file_size,
               "a rebuild asked for a snapshot L1 table outside the file");
    absl::Status s =
        rebuild->CountSnapshotL1Table(i, file.Read(t.offset, t.bytes));
    if (!s.ok()) {
      FUZZ_CHECK(absl::IsFailedPrecondition(s),
                 "a snapshot L1 table refused with a code other than "
                 "FailedPrecondition");
      return;
    }
  }
  for (uint64_t offset : rebuild->l2_tables()) {
    FUZZ_CHECK(offset % cluster == 0 && offset + cluster <= md.file_size,
               "a rebuild asked for an L2 table outside the file");
    absl::Status s = rebuild->CountL2Table(offset, file.Read(offset, cluster));
    if (!s.ok()) {
      FUZZ_CHECK(absl::IsFailedPrecondition(s),
                 "an L2 table refused with a code other than "
                 "FailedPrecondition");
      return;
    }
  }
  absl::StatusOr<WritePlan> plan = rebuild->Plan();
  if (!plan.ok()) {
    FUZZ_CHECK(absl::IsFailedPrecondition(plan.status()),
               "a rebuild plan refused with a code other than "
               "FailedPrecondition");
    return;
  }
  FUZZ_CHECK(!plan->empty() && plan->back().offset == 72 &&
                 plan->back().barrier_before && plan->back().bytes.size() == 8,
             "a rebuild that does not clear the dirty bit last");
  const uint64_t end = (md.file_size + cluster - 1) / cluster * cluster;
  for (const MetadataWrite& w : *plan) {
    FUZZ_CHECK(w.offset + w.bytes.size() <= end ||
                   (w.offset >= end && w.offset % cluster == 0 &&
                    w.bytes.size() == cluster),
               "a rebuild writes past the file other than whole new blocks");
  }
  FUZZ_CHECK(rebuild->clusters_in_use() >= 1,
             "a rebuild that counts not even the header");
}

// Parses the snapshot table (empty when it is refused).
std::vector<Snapshot> ParseSnapshots(const Qcow2Header& header,
                                     const Qcow2Metadata& md,
                                     const File& file) {
  if (header.nb_snapshots == 0) return {};
  const uint64_t file_size = file.bytes.size();
  FUZZ_CHECK(header.snapshots_offset < file_size,
             "a layout with a snapshot table past the file accepted");
  const std::vector<uint8_t> bytes = file.Read(
      header.snapshots_offset,
      std::min(file_size - header.snapshots_offset, kMaxSnapshotTableBytes));
  absl::StatusOr<std::vector<Snapshot>> snapshots =
      ParseSnapshotTable(header, bytes, file_size, md.layout, "fuzz");
  if (!snapshots.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(snapshots.status()),
               "a snapshot table refused with a code other than "
               "InvalidArgument");
    return {};
  }
  FUZZ_CHECK(snapshots->size() == header.nb_snapshots,
             "a snapshot table with another count than nb_snapshots");
  return std::move(*snapshots);
}

// Maps a few clusters of each usable snapshot's disk (the first 4)
// through its own L1 table.
void Snapshots(const Qcow2Header& header,
               const std::vector<Snapshot>& snapshots, const File& file,
               const std::vector<uint8_t>& refcounts) {
  const uint64_t file_size = file.bytes.size();
  for (size_t i = 0; i < snapshots.size() && i < 4; ++i) {
    const Snapshot& s = snapshots[i];
    if (!s.problem.empty()) continue;
    const Qcow2Header mapped = SnapshotHeader(header, s);
    // (An empty L1 table, of a disk of 0 bytes, is never read.)
    FUZZ_CHECK(
        mapped.l1_size == 0 ||
            mapped.l1_table_offset + uint64_t{mapped.l1_size} * 8 <= file_size,
        "a usable snapshot's L1 table runs past the file");
    absl::StatusOr<std::unique_ptr<Qcow2Metadata>> built = BuildQcow2Metadata(
        mapped, file_size,
        file.Read(mapped.l1_table_offset, uint64_t{mapped.l1_size} * 8),
        refcounts, "fuzz", 2, 2);
    if (!built.ok()) {
      FUZZ_CHECK(absl::IsInvalidArgument(built.status()),
                 "a snapshot's layout refused with a code other than "
                 "InvalidArgument");
      continue;
    }
    const uint64_t cluster = mapped.cluster_size();
    const uint64_t clusters = (mapped.size + cluster - 1) / cluster;
    const uint64_t stride = std::max<uint64_t>(1, clusters / 16);
    for (uint64_t c = 0; c < clusters; c += stride) {
      (void)Map(**built, file, c * cluster);
    }
  }
}

std::vector<uint8_t>& FileBuffer() {
  static std::vector<uint8_t>* buffer = [] {
    auto* b = new std::vector<uint8_t>();
    b->reserve(kMaxFileBytes);
    return b;
  }();
  return *buffer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t>& buffer = FileBuffer();
  buffer.assign(data, data + size);  // within its capacity: no new mapping
  File file{buffer};
  absl::StatusOr<Qcow2Header> header =
      ParseQcow2Header(std::span<const uint8_t>(data, size), "fuzz");
  if (!header.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(header.status()),
               "a header refused with a code other than InvalidArgument");
    return 0;
  }
  FUZZ_CHECK(header->cluster_bits >= 9 && header->cluster_bits <= 21,
             "cluster_bits out of range accepted");
  FUZZ_CHECK(header->refcount_order <= 6, "refcount_order above 6 accepted");
  FUZZ_CHECK(header->l1_size <= kMaxL1Entries, "an oversized L1 accepted");
  const uint64_t file_size = size;
  absl::StatusOr<MetadataLayout> layout =
      CheckQcow2Layout(*header, file_size, "fuzz");
  if (!layout.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(layout.status()),
               "a layout refused with a code other than InvalidArgument");
    return 0;
  }
  std::vector<uint8_t> l1 =
      file.Read(header->l1_table_offset, uint64_t{header->l1_size} * 8);
  std::vector<uint8_t> refcounts = file.Read(
      header->refcount_table_offset, header->refcount_table_entries() * 8);
  absl::StatusOr<std::unique_ptr<Qcow2Metadata>> built =
      BuildQcow2Metadata(*header, file_size, l1, refcounts, "fuzz", 2, 2);
  FUZZ_CHECK(built.ok(), "a checked layout refused by BuildQcow2Metadata");
  Qcow2Metadata& md = **built;
  const std::vector<Snapshot> snapshots = ParseSnapshots(*header, md, file);
  Rebuild(md, file, snapshots);
  Snapshots(*header, snapshots, file, refcounts);

  // Map clusters spread over the whole disk (at most 256).
  const uint64_t cluster = md.cluster_size();
  const uint64_t clusters = (header->size + cluster - 1) / cluster;
  const uint64_t stride = std::max<uint64_t>(1, clusters / 256);
  for (uint64_t c = 0; c < clusters; c += stride) {
    (void)Map(md, file, c * cluster + (c % 7) * 64 % cluster);
  }

  // Allocate and name a few clusters, as a write would.
  if (!CheckIncompatibleFeatures(header->incompatible_features, true, "fuzz")
           .ok()) {
    return 0;
  }
  ClusterAllocator allocator(md);
  for (uint64_t c = 0; c < clusters && c < 64; c += 1 + c / 4) {
    const uint64_t voff = c * cluster;
    WritePlan plan;
    // A shared table is copied from the cache: mapping loads it.
    if (!Map(md, file, voff).ok()) return 0;
    uint64_t shared = 0;
    auto l2 = Drive(md, file, [&] {
      return EnsureL2Table(md, allocator, voff, plan, &shared);
    });
    if (!Apply(file, md, plan) || !l2.ok()) return 0;
    const uint64_t index = voff / md.header.bytes_per_l2();
    FUZZ_CHECK((md.l1[index] & kCopied) != 0,
               "an L2 table to write that the L1 entry names as shared");
    if (shared != 0) {
      FUZZ_CHECK(md.L2TableOffset(index) != shared,
                 "a shared L2 table still named after its copy");
      plan.clear();
      auto released = Drive(md, file, [&] {
        return ReleaseSharedL2Table(md, allocator, shared, plan);
      });
      if (!Apply(file, md, plan) || !released.ok()) return 0;
    }
    plan.clear();
    auto got = Drive(md, file, [&] { return allocator.Allocate(plan); });
    if (!Apply(file, md, plan) || !got.ok()) return 0;
    if (!std::holds_alternative<Allocated>(*got)) return 0;
    const uint64_t host = std::get<Allocated>(*got).host_offset;
    FUZZ_CHECK(host % cluster == 0, "an unaligned cluster allocated");
    FUZZ_CHECK(!md.layout.Overlap(host, cluster).has_value(),
               "a data cluster allocated inside metadata");
    if (!file.Write(host, std::vector<uint8_t>(cluster, 0x5a))) return 0;
    md.file_size = std::max<uint64_t>(md.file_size, host + cluster);
    plan.clear();
    auto set = Drive(md, file, [&] {
      // Every subcluster allocated, with extended L2 entries.
      return SetL2Entry(md, voff, EncodeL2Data(host), plan,
                        md.header.extended_l2() ? 0xffffffffull : 0);
    });
    if (!Apply(file, md, plan) || !set.ok()) return 0;
    absl::StatusOr<Mapping> m = Map(md, file, voff);
    FUZZ_CHECK(m.ok() && m->kind == L2Kind::kData && m->host_cluster == host,
               "an allocated cluster does not map back where it was put");
    auto count = Drive(md, file, [&] { return allocator.Refcount(host); });
    FUZZ_CHECK(count.ok() && std::holds_alternative<uint64_t>(*count) &&
                   std::get<uint64_t>(*count) == 1,
               "an allocated cluster's refcount is not 1");
  }
  return 0;
}
